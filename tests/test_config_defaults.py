"""Every default is written once (the schema), and the composed Atari config is the documented one.

The YAML presets under conf/ extend the dataclasses in rlbench/config/schema.py (and the
algorithms' and env families' Schema); a preset
that restates a schema default writes it twice, and the two copies drift apart. The
"### Atari settings" of docs/r2d2.md are checked three ways: in the composed config for pong
and breakout, in that text itself, and in the ale-py AtariVectorEnv that rlbench builds from them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from rlbench.config.schema import GROUP_SCHEMAS, Config
from rlbench.core.algorithms import ALGORITHMS, config_module
from rlbench.core.env_families import FAMILIES, family

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
SCHEMA_ENTRY = re.compile(r"^/schema/(\w+)@(\w+)$")  # `- /schema/<group>@<package>: base` (algo, env: its name)


def _schema(group: str, option: str) -> type:
    """The dataclass behind `/schema/<group>: <option>`: `base`, or an algorithm's or env family's own Schema."""
    own = {"algo": lambda: config_module(option).Schema, "env": lambda: family(option).Schema}
    return own[group]() if group in own else GROUP_SCHEMAS[group]


def _label(cls: type) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def _schema_defaults(cls: type) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(cls), resolve=False)


def _restated(node: dict, defaults: dict, prefix: str = "") -> list[str]:
    """`key=value` for every leaf of `node` equal to its schema default (MISSING ones excluded)."""
    found = []
    for key, value in node.items():
        default = defaults.get(key, "???")
        if isinstance(value, dict) and isinstance(default, dict):
            found += _restated(value, default, f"{prefix}{key}.")
        elif default != "???" and value == default and isinstance(value, bool) == isinstance(default, bool):
            found.append(f"{prefix}{key}={value!r}")
    return found


def _schema_nodes(text: str) -> list[tuple[str, dict, dict]]:
    """(schema name, the node of the file that extends it, the schema's defaults) of a conf/ YAML text."""
    body = OmegaConf.to_container(OmegaConf.create(text), resolve=False) or {}
    entries = body.pop("defaults", [])
    nodes = []
    if "schema" in entries:  # conf/config.yaml: its top-level scalars against Config's
        top = {k: v for k, v in _schema_defaults(Config).items() if not isinstance(v, dict)}
        nodes.append(("Config", {k: v for k, v in body.items() if k != "hydra"}, top))
    for entry in entries:
        match = SCHEMA_ENTRY.match(next(iter(entry))) if isinstance(entry, dict) else None
        if match:
            group, package = match.groups()
            schema = _schema(group, next(iter(entry.values())))
            node = body if package == "_here_" else body.get(package, {})
            nodes.append((_label(schema), node, _schema_defaults(schema)))
    return nodes


def restated_defaults(text: str) -> list[str]:
    """The schema defaults a conf/ YAML text writes again; [] if it extends no schema."""
    return [kv for _, node, defaults in _schema_nodes(text) for kv in _restated(node, defaults)]


YAML_FILES = sorted(CONF.rglob("*.yaml"))


def test_every_schema_is_extended_by_a_checked_yaml():
    """The walk finds conf/config.yaml and every group's presets (else the next test is vacuous)."""
    seen = {name for p in YAML_FILES for name, _, _ in _schema_nodes(p.read_text())}
    schemas = [
        *GROUP_SCHEMAS.values(),
        *(config_module(a).Schema for a in ALGORITHMS),
        *(family(f).Schema for f in FAMILIES),
    ]
    assert seen == {"Config", *(_label(cls) for cls in schemas)}


def test_no_yaml_restates_a_schema_default():
    """A value equal to the schema default belongs in the schema only."""
    twice = [
        f"{p.relative_to(ROOT)}: {kv} (the schema default)"
        for p in YAML_FILES
        for kv in restated_defaults(p.read_text())
    ]
    assert not twice, "written twice, delete from the YAML:\n" + "\n".join(twice)


def test_the_check_catches_a_restated_default():
    """The checker itself: restated defaults (nested, 40 for 40.0, in config.yaml, under a
    package) are caught; a preset's own values and MISSING fields (id) are not."""
    text = """
defaults:
  - /schema/algo@_here_: r2d2
  - _self_
burn_in: 4
grad_clip: 80
network:
  lstm_hidden: 512
  torso: mlp
"""
    assert restated_defaults(text) == ["grad_clip=80", "network.lstm_hidden=512"]
    assert restated_defaults("defaults:\n  - schema\nactors: 40\nseed: 7\n") == ["actors=40"]
    env = "defaults:\n  - /schema/env@env: atari\nenv:\n  id: pong\n  stack: 4\n  episodic_life: true\n"
    assert restated_defaults(env) == ["stack=4"]


# --- docs/r2d2.md's Atari settings --------------------------------------------------------

# key in env: (value, how docs/r2d2.md's "### Atari settings" says it)
ATARI = {
    "reward_clipping": (False, "no reward clipping"),
    "frameskip": (4, "frameskip 4"),
    "stack": (4, "4 stacked frames"),
    "img_size": (84, "84x84 grey"),
    "noop_max": (30, "`env.noop_max=30`"),
    "full_action_space": (True, "the full action set, 18 actions in every game (`env.full_action_space=true`)"),
    "fire_reset": (False, "no FIRE at reset (`env.fire_reset=false`)"),
    "sticky_actions": (0.0, "no sticky actions (`env.sticky_actions=0`)"),
    "episodic_life": (False, "full episodes (no life-loss terminals)"),
    "max_episode_frames": (108_000, "truncated at 108,000 frames"),
}
NOOPS = "ale-py draws 0 to 30 no-ops at each reset where SEED RL draws 1 to 30"  # noop_max + 1 passed to ale-py


def _atari_settings_section() -> str:
    text = (ROOT / "docs" / "r2d2.md").read_text()
    return text.split("### Atari settings", 1)[1].split("\n#", 1)[0]


@pytest.mark.parametrize("game", ["pong", "breakout"])
def test_composed_atari_config_is_the_readmes(compose_cfg, game):
    """The real config for pong and breakout has every setting docs/r2d2.md states."""
    env = compose_cfg([f"env={game}"]).env
    assert (env.kind, env.id) == ("atari", game)
    assert {k: env[k] for k in ATARI} == {k: v for k, (v, _) in ATARI.items()}


def test_readme_states_the_atari_settings():
    """docs/r2d2.md says what the config holds (one phrase per setting), and the no-op range."""
    section = " ".join(_atari_settings_section().split())
    missing = [p for p in [*(p for _, p in ATARI.values()), NOOPS] if " ".join(p.split()) not in section]
    assert not missing and "minimal action set" not in section, f"docs/r2d2.md's Atari settings lack {missing}"


def _legal_action_set(game: str) -> int:
    import ale_py

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return len(ale.getLegalActionSet())


@pytest.fixture
def ale_kwargs(monkeypatch) -> dict:
    """The keyword arguments rlbench passes to ale-py's AtariVectorEnv (the real env is built)."""
    import ale_py.vector_env

    seen: dict = {}
    real = ale_py.vector_env.AtariVectorEnv

    class Spy(real):
        def __init__(self, *args, **kwargs):
            seen.update(kwargs)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(ale_py.vector_env, "AtariVectorEnv", Spy)
    return seen


@pytest.mark.parametrize("game", ["pong", "breakout"])
def test_atari_env_has_the_readme_settings(compose_cfg, ale_kwargs, game):
    """The AtariVectorEnv built from the real config: obs, SEED RL's full action set (18 actions),
    no FIRE at reset, no-ops, truncation by frames (200 frames / frameskip 4 = 50 steps), no
    life-loss terminals."""
    from rlbench.envs.atari.vector_env import AtariActors

    env_cfg = compose_cfg([f"env={game}", "env.max_episode_frames=200"]).env
    actors = AtariActors(env_cfg, num_envs=2, threads=1, batch=0)
    try:
        assert actors.obs_shape == (4, 84, 84)
        assert actors.num_actions == _legal_action_set(game) == 18
        # ale-py draws 0..noop_max-1 no-ops: 31 gives SEED RL's maximum of 30 (from 0, not 1)
        assert ale_kwargs["repeat_action_probability"] == 0.0 and ale_kwargs["noop_max"] == 31
        assert ale_kwargs["reward_clipping"] is False and ale_kwargs["episodic_life"] is False
        assert ale_kwargs["full_action_space"] is True and ale_kwargs["use_fire_reset"] is False

        first = actors.reset(seed=0)
        done_at, changed = [], []
        for step in range(1, 61):  # NOOPs but one FIRE (action 1) at step 11; Pong scores no 21 points
            actors.send(np.full(2, 1 if step == 11 else 0, np.int64))
            batch = actors.recv()
            changed.append(bool((batch.obs[:, -1] != first.obs[:, -1]).any()))
            if batch.done.any():
                done_at.append((step, batch.done.tolist()))
        if game == "breakout":  # its ball waits for FIRE: with FIRE at reset the screen moves at once
            assert not any(changed[:10]), "the screen changed before FIRE: FIRE was pressed at reset"
        assert any(changed[10:]), "the screen never changed after FIRE"
        # Breakout loses its first life at step 35 (the ball launched at 11): with episodic_life it would end there.
        assert done_at[:1] == [(50, [True, True])], done_at
    finally:
        actors.close()


def test_atari_rewards_are_not_clipped(compose_cfg):
    """The real Atari config with a game that scores > 1 early (Space Invaders: 5 to 30 per
    alien; Pong and Breakout's early points are 1 either way): the reward arrives unclipped."""
    from rlbench.envs.atari.vector_env import AtariActors

    actors = AtariActors(compose_cfg(["env=pong", "env.id=space_invaders"]).env, num_envs=2, threads=1, batch=0)
    rng = np.random.default_rng(0)
    try:
        actors.reset(seed=0)
        for _ in range(500):
            actors.send(rng.integers(0, actors.num_actions, 2))
            reward = actors.recv().reward
            if reward.any():
                break
        assert reward.max() > 1, f"rewards {reward}: clipped to [-1, 1]"
    finally:
        actors.close()


# SEED RL's published Atari run (gcp/train_atari.sh) and its flags, as the composed defaults:
# the R2D2 learner and coupling, central inference's batching, V-trace's reward clip.
PUBLISHED_RUN = {
    "algo.samples_per_insert": 0.75,  # replay_ratio 0.75 (the flag's 1.5 is not what SEED ran on Atari)
    "algo.grad_clip": 80.0,  # clip_norm 80 (flag 40)
    "algo.learning_rate": 1e-4,
    "algo.seq_len": 80,  # unroll_length 80
    "algo.burn_in": 40,
    "algo.batch_size": 64,
    "algo.adam_eps": 1e-3,  # Keras' epsilon (rlbench/algo/common/keras_adam.py)
    "algo.target_update": 2500,  # update_target_every_n_step's default
    "algo.coupling": "unroll_queue",  # the learner feeds on a bounded unroll queue
    "algo.unroll_queue_size": 100,  # unroll_queue_max_size
    "inference_batch": -1,  # inference_batch_size -1: auto, num_envs // 2
}


@pytest.mark.parametrize("game", ["pong", "breakout"])
def test_the_composed_r2d2_is_seeds_published_run(compose_cfg, game):
    conf = OmegaConf.to_container(compose_cfg([f"env={game}"]), resolve=True)
    got = {k: OmegaConf.select(OmegaConf.create(conf), k) for k in PUBLISHED_RUN}
    assert got == PUBLISHED_RUN


def test_vtrace_clips_rewards_on_atari_and_not_on_cartpole(compose_cfg):
    assert compose_cfg(["algo=vtrace"]).algo.max_abs_reward == 1.0  # SEED's V-trace scripts, IMPALA
    assert compose_cfg(["env=cartpole", "algo=vtrace_vector"]).algo.max_abs_reward == 0.0
