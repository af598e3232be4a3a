"""The MLflow dataset digest (rlbench.tracking.dataset) tells apart every env setting,
the action set and FIRE at reset included."""

from __future__ import annotations

from dataclasses import fields

from rlbench.config.schema import EnvConfig
from rlbench.tracking.dataset import env_dataset


def test_digest_follows_every_env_setting():
    base = EnvConfig(kind="atari", id="pong")
    changed = {"full_action_space": False, "fire_reset": True, "noop_max": 29, "sticky_actions": 0.25,
               "episodic_life": True, "reward_clipping": True, "max_episode_frames": 200, "frameskip": 2,
               "stack": 2, "img_size": 64, "id": "breakout", "kind": "gym"}
    assert set(changed) == {f.name for f in fields(EnvConfig)}, "a new EnvConfig field: add it here"
    digest = env_dataset(base).digest
    same = [k for k, v in changed.items() if env_dataset(EnvConfig(**{**vars(base), k: v})).digest == digest]
    assert not same, f"the digest ignores {same}"
