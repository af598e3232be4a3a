"""env.id checks and specs (rlbench.envs.spec) against the real actors they describe."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from rlbench.config.schema import EnvConfig
from rlbench.core.env_families import family
from rlbench.envs.gym import probe as gym_probe
from rlbench.envs.spec import EnvIdError, check_env, env_spec
from rlbench.envs.vector import make_actors

TOY = "tests.toy_env:RlbenchToy-v0"


def atari(env_id: str, **kw):
    return family("atari").Schema(id=env_id, **kw)


def gym_cfg(env_id: str):
    return family("gym").Schema(id=env_id)


@pytest.mark.parametrize(
    "rom,stack,size,full", [("pong", 4, 84, True), ("breakout", 2, 64, False), ("space_invaders", 4, 84, True)]
)
def test_atari_spec_matches_vector_env(rom, stack, size, full):
    cfg = atari(rom, stack=stack, img_size=size, full_action_space=full)
    assert check_env(cfg) is None
    s = env_spec(cfg)
    actors = make_actors(cfg, num_envs=2, threads=1, batch=0)
    try:
        obs = actors.reset(seed=0).obs
        assert s.obs_shape == tuple(actors.obs_shape) == obs.shape[1:] == (stack, size, size)
        assert s.obs_dtype == obs.dtype == np.uint8
        assert s.num_actions == actors.num_actions
        assert (s.stack, s.frame_shape, s.bytes_per_frame) == (stack, (size, size), size * size)
    finally:
        actors.close()
    # SEED RL's full action set by default; the ROM's minimal set without it (a cache entry of its own)
    assert (env_spec(atari("pong")).num_actions, env_spec(atari("breakout")).num_actions) == (18, 18)
    minimal = [env_spec(atari(g, full_action_space=False)).num_actions for g in ("pong", "breakout")]
    assert minimal == [6, 4]


@pytest.mark.parametrize(
    "bad,expect",
    [
        ("ALE/Pong-v5", "env.id=pong"),
        ("PongNoFrameskip-v4", "env.id=pong"),
        ("ALE/MsPacman-v5", "env.id=ms_pacman"),
        ("nosuchgame", "not an ALE ROM"),
        ("CartPole-v1", "env.kind=gym"),
    ],
)
def test_atari_refuses_non_rom_ids(bad, expect):
    reason = check_env(atari(bad))
    assert reason is not None and expect in reason and "\n" not in reason
    with pytest.raises(EnvIdError, match="env.id="):
        env_spec(atari(bad))


def test_atari_rom_that_ale_cannot_load_is_refused_without_killing_us():
    """ale-py ships combat.bin, but loading it makes ALE exit the process."""
    reason = check_env(atari("combat"))
    assert reason is not None and "cannot load" in reason


def test_cartpole_spec():
    s = env_spec(gym_cfg("CartPole-v1"))
    assert (s.obs_shape, s.obs_dtype, s.num_actions, s.stack, s.frame_shape) == ((4,), np.float32, 2, 1, (4,))
    assert s.bytes_per_frame == 16


@pytest.fixture
def toy_unloaded():
    """Forget the toy env, so that only the `module:` prefix can register it."""
    for forget in (lambda: sys.modules.pop("tests.toy_env", None), lambda: gym.registry.pop("RlbenchToy-v0", None)):
        forget()
    gym_probe.gym_spaces.cache_clear()
    yield
    gym_probe.gym_spaces.cache_clear()


def test_user_env_via_module_prefix(toy_unloaded):
    assert "RlbenchToy-v0" not in gym.registry
    assert check_env(gym_cfg(TOY)) is None
    assert "RlbenchToy-v0" in gym.registry
    s = env_spec(gym_cfg(TOY))
    assert (s.obs_shape, s.num_actions) == ((4,), 2)


def test_user_env_runs_in_gym_actors(toy_unloaded):
    actors = make_actors(gym_cfg(TOY), num_envs=3, threads=1, batch=0)  # imports tests.toy_env itself
    from tests.toy_env import EPISODE

    try:
        assert (actors.obs_shape, actors.num_actions) == ((4,), 2)
        b = actors.reset(seed=0)
        assert b.obs.shape == (3, 4) and b.done.all()
        for t in range(1, EPISODE + 2):
            actors.send(np.array([1, 0, 1]))
            b = actors.recv()
            ended = t == EPISODE  # same-step autoreset: the done step shows the next episode's first obs
            assert b.done.tolist() == [ended] * 3
            assert b.obs[:, 0].tolist() == [0 if ended else t % EPISODE] * 3
            assert b.obs[:, 1].tolist() == ([0] * 3 if ended else [1, 0, 1])
            assert b.obs.dtype == np.float32 and b.reward.tolist() == [1.0] * 3
    finally:
        actors.close()


@pytest.mark.parametrize(
    "bad,expect",
    [
        ("nosuchmodule:Foo-v0", "No module named 'nosuchmodule'"),
        ("NoSuchEnv-v0", "NoSuchEnv"),
        ("CartPole-v99", "v99"),
        ("Pendulum-v1", "Discrete"),
        ("tests.toy_env:RlbenchToyPixels-v0", "1-D Box"),
    ],
)
def test_gym_refusals(bad, expect):
    reason = check_env(gym_cfg(bad))
    assert reason is not None and expect in reason and "\n" not in reason
    with pytest.raises(EnvIdError):
        env_spec(gym_cfg(bad))


def test_unknown_kind():
    assert "env.kind='mujoco': no such env family; known: atari, gym" in check_env(
        EnvConfig(kind="mujoco", id="Ant-v4")
    )
