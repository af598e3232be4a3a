"""What a gymnasium id gives the agent, or why it cannot run, before any actor starts.

Gym ids are anything gymnasium.make accepts, `module:EnvName-v0` included (gymnasium imports
`module`, which registers the env); they need a Discrete action space and a 1-D Box
observation (the MLP torso). Probes are cached per id: a sweep validates many jobs. docs/envs.md.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rlbench.envs.atari.probe import rom_of
from rlbench.envs.spec import EnvIdError, EnvSpec


def gym_spec(cfg) -> EnvSpec:
    """The id's 1-D observation as float32 (GymActors emit float32), its action count."""
    probe = gym_spaces(cfg.id)
    if isinstance(probe, str):
        raise EnvIdError(probe)
    shape, n = probe
    return EnvSpec(shape, np.dtype(np.float32), n, 1, shape)


@functools.cache
def gym_spaces(env_id: str) -> tuple[tuple[int, ...], int] | str:
    """(observation shape, action count) of gymnasium.make(env_id), or why it cannot be used."""
    import gymnasium as gym  # lazy: keeps gymnasium off the start

    try:
        env = gym.make(env_id)
    except Exception as e:  # noqa: BLE001 - unknown id, failed `module:` import, missing dependency, bad version
        return atari_game(env_id) or f"env.id={env_id}: gymnasium.make failed: {_one_line(e)}"
    try:
        obs, act = env.observation_space, env.action_space
    finally:
        env.close()
    if not isinstance(act, gym.spaces.Discrete) or int(act.start) != 0:
        return f"env.id={env_id}: R2D2 needs a Discrete action space (starting at 0), found {act}"
    if not isinstance(obs, gym.spaces.Box) or len(obs.shape) != 1:
        return atari_game(env_id) or (
            f"env.id={env_id}: env.kind=gym needs a 1-D Box observation (MLP torso), "
            f"found {obs}; image observations need the Atari family (env.kind=atari)"
        )
    return tuple(int(d) for d in obs.shape), int(act.n)


def atari_game(env_id: str) -> str | None:
    """For an Atari game's id given to the gym family (env=cartpole): that its image
    observations need the Atari family, and the id to give there; None for another id."""
    rom = rom_of(env_id)
    if rom is None and not env_id.startswith("ALE/"):
        return None
    there = f"env.id={rom}" if rom else "env.id=<its ALE ROM name>"
    return (
        f"env.id={env_id}: an Atari game: image observations need the Atari env family (env.kind=atari), "
        f"not env=cartpole's gym family (1-D observations); drop env=cartpole and give {there} "
        "(the Atari presets: env=pong, env=breakout)"
    )


def _one_line(e: Any) -> str:
    return f"{type(e).__name__}: " + " ".join(str(e).split())
