"""The MLflow dataset digest (rlbench.tracking.dataset) tells apart every env setting,
the action set and FIRE at reset included; its source is the page the family names."""

from __future__ import annotations

from dataclasses import fields

from rlbench.core.env_families import family
from rlbench.tracking.dataset import env_dataset

Atari, Gym = family("atari").Schema, family("gym").Schema


def test_digest_follows_every_env_setting():
    base = Atari(id="pong")
    changed = {
        "full_action_space": False,
        "fire_reset": True,
        "noop_max": 29,
        "sticky_actions": 0.25,
        "engine": "envpool",
        "episodic_life": True,
        "reward_clipping": True,
        "max_episode_frames": 200,
        "frameskip": 2,
        "stack": 2,
        "img_size": 64,
        "id": "breakout",
    }
    assert set(changed) | {"kind"} == {f.name for f in fields(Atari)}, "a new Atari field: add it here"
    digest = env_dataset(base).digest
    same = [k for k, v in changed.items() if env_dataset(Atari(**{**vars(base), k: v})).digest == digest]
    assert not same, f"the digest ignores {same}"
    assert env_dataset(Gym(id="pong", frameskip=4)).digest != digest  # another family, another package


def test_the_source_is_the_familys_page():
    assert env_dataset(Atari(id="space_invaders")).source.url == "https://ale.farama.org/environments/spaceinvaders/"
    gym = env_dataset(Gym(id="CartPole-v1"))
    assert (gym.source.url, gym.name) == ("https://gymnasium.farama.org/", "CartPole-v1 (gym, frameskip 1)")
