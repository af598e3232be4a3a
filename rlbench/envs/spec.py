"""What an env.id gives the agent (observation shape and dtype, action count), known
before any actor starts, and a one-line reason when an id cannot run under its env.kind.

Atari ids are ALE ROM names (`pong`, `space_invaders`); the action count follows
env.full_action_space as ale-py's AtariVectorEnv does: the legal action set (18 for every
ROM) when true, as SEED RL's Atari env, the ROM's minimal set (Pong 6, Breakout 4) when false.
It is read by loading the ROM in a child process: ALE ends the whole process (exit 1) for
a few ROMs that ale-py ships but cannot run (combat, joust, maze_craze, warlords in 0.12).
Gym ids are anything gymnasium.make accepts, `module:EnvName-v0` included (gymnasium
imports `module`, which registers the env); they need a Discrete action space and a 1-D
Box observation (the MLP torso). Probes are cached per id (and action set): a sweep
validates many jobs.
"""

from __future__ import annotations

import difflib
import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlbench.config.schema import EnvConfig


class EnvIdError(ValueError):
    """env.id cannot run under env.kind; the message says why in one line."""


@dataclass(frozen=True)
class EnvSpec:
    """One actor's observation (stack frames along axis 0) and its number of actions."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int
    stack: int  # frames stacked along obs axis 0; 1 = none (gym vector observations)
    frame_shape: tuple[int, ...]  # obs_shape without the stack axis (Atari); = obs_shape (gym)

    @property
    def bytes_per_frame(self) -> int:
        """Bytes of one unstacked frame."""
        return int(np.prod(self.frame_shape, dtype=np.int64)) * self.obs_dtype.itemsize


def env_spec(cfg: EnvConfig) -> EnvSpec:
    """The spec of cfg's env without starting a vector env; raises EnvIdError if it cannot run."""
    if cfg.kind == "atari":
        n = _atari_actions(cfg.id, cfg.full_action_space)
        if isinstance(n, str):
            raise EnvIdError(n)
        frame = (cfg.img_size, cfg.img_size)
        return EnvSpec((cfg.stack, *frame), np.dtype(np.uint8), n, cfg.stack, frame)
    if cfg.kind == "gym":
        probe = _gym_spaces(cfg.id)
        if isinstance(probe, str):
            raise EnvIdError(probe)
        shape, n = probe
        return EnvSpec(shape, np.dtype(np.float32), n, 1, shape)  # GymActors emit float32
    raise EnvIdError(f"env.kind={cfg.kind}: one of atari, gym")


def check_env(cfg: EnvConfig) -> str | None:
    """None if cfg's env can run under its env.kind, else a one-line reason."""
    try:
        env_spec(cfg)
    except EnvIdError as e:
        return str(e)
    return None


_PROBE = """
import sys, ale_py
from ale_py import roms
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
ale = ale_py.ALEInterface()
ale.loadROM(str(roms.get_rom_path(sys.argv[1])))
print(len(ale.getLegalActionSet() if sys.argv[2] == "full" else ale.getMinimalActionSet()))
"""


@functools.cache
def _atari_actions(rom: str, full_action_space: bool) -> int | str:
    """The ROM's action count (legal set if full_action_space, else minimal), or why `rom` is no
    runnable ALE ROM."""
    from ale_py import roms

    ids = roms.get_all_rom_ids()
    if rom not in ids:
        return f"env.id={rom}: " + _not_a_rom(rom, ids)
    action_set = "full" if full_action_space else "minimal"
    try:
        p = subprocess.run([sys.executable, "-c", _PROBE, rom, action_set], check=False, capture_output=True,
                           text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"env.id={rom}: ALE did not load this ROM within 300 s"
    if p.returncode != 0:
        why = next((ln.strip() for ln in p.stderr.splitlines() if ln.strip()), "no message")
        why = re.sub(r'"[^"]*[/\\]', '"', why)[:200]  # ROM path -> file name
        return f"env.id={rom}: ale-py ships this ROM but ALE cannot load it (exit {p.returncode}: {why})"
    return int(p.stdout.split()[-1])  # last line: ALE_ROMS_DIR makes ale-py print before it


def _snake_rom(env_id: str) -> str:
    """The ROM name a gymnasium ALE id points at: ALE/MsPacman-v5 -> ms_pacman."""
    base = re.sub(r"^ALE/|-v\d+$|NoFrameskip|Deterministic|-ram", "", env_id.split(":")[-1])
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower()


def _not_a_rom(env_id: str, ids: list[str]) -> str:
    """Reason for an id that is no ROM name: the ROM it names in gymnasium form, or examples."""
    snake = _snake_rom(env_id)
    if snake in ids:
        return f"with env.kind=atari use the ALE ROM name in snake_case: env.id={snake}"
    close = difflib.get_close_matches(snake, ids, n=3, cutoff=0.75)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return (f"not an ALE ROM name; {hint}ROMs are snake_case, e.g. pong, breakout, space_invaders, ms_pacman "
            f"({len(ids)} in ale-py); a gymnasium id needs env.kind=gym")


@functools.cache
def _gym_spaces(env_id: str) -> tuple[tuple[int, ...], int] | str:
    """(observation shape, action count) of gymnasium.make(env_id), or why it cannot be used."""
    import gymnasium as gym

    try:
        env = gym.make(env_id)
    except Exception as e:  # noqa: BLE001 - unknown id, failed `module:` import, missing dependency, bad version
        return f"env.id={env_id}: gymnasium.make failed: {_one_line(e)}"
    try:
        obs, act = env.observation_space, env.action_space
    finally:
        env.close()
    if not isinstance(act, gym.spaces.Discrete) or int(act.start) != 0:
        return f"env.id={env_id}: R2D2 needs a Discrete action space (starting at 0), found {act}"
    if not isinstance(obs, gym.spaces.Box) or len(obs.shape) != 1:
        from ale_py import roms

        rom = _snake_rom(env_id)
        atari = f"env.kind=atari env.id={rom}" if rom in roms.get_all_rom_ids() else "env.kind=atari (ROM names)"
        return (f"env.id={env_id}: env.kind=gym needs a 1-D Box observation (MLP torso), found {obs}; "
                f"pixel Atari games go through {atari}")
    return tuple(int(d) for d in obs.shape), int(act.n)


def _one_line(e: Any) -> str:
    return f"{type(e).__name__}: " + " ".join(str(e).split())
