"""What an ALE ROM gives the agent, or why it cannot run, before any actor starts.

`atari_spec` reads the ROM's action count in a child process (ALE ends the process for a few
ROMs it ships but cannot run), from the engine env.engine names, cached per ROM, action set and
engine. docs/envs.md, "Atari's probe".
"""

from __future__ import annotations

import difflib
import functools
import re
import subprocess
import sys

import numpy as np

from rlbench.envs.atari.engines import envpool_roms
from rlbench.envs.atari.envpool_env import task_id
from rlbench.envs.spec import EnvIdError, EnvSpec

_PROBE = """
import sys, ale_py
from ale_py import roms
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
ale = ale_py.ALEInterface()
ale.loadROM(str(roms.get_rom_path(sys.argv[1])))
print(len(ale.getLegalActionSet() if sys.argv[2] == "full" else ale.getMinimalActionSet()))
"""
_ENVPOOL_PROBE = """
import sys, envpool
print(envpool.make_spec(sys.argv[1], full_action_space=sys.argv[2] == "full").action_space.n)
"""


def atari_spec(cfg) -> EnvSpec:
    """`stack` frames of img_size x img_size grey uint8, the ROM's action count."""
    n = atari_actions(cfg.id, cfg.full_action_space, getattr(cfg, "engine", "ale"))
    if isinstance(n, str):
        raise EnvIdError(n)
    frame = (cfg.img_size, cfg.img_size)
    return EnvSpec((cfg.stack, *frame), np.dtype(np.uint8), n, cfg.stack, frame)


@functools.cache
def atari_actions(rom: str, full_action_space: bool, engine: str = "ale") -> int | str:
    """The ROM's action count (legal set if full_action_space, else minimal), or why `rom` is no
    ROM `engine` can run."""
    from ale_py import roms  # lazy: keeps ale_py off the start

    ids = roms.get_all_rom_ids()
    if rom not in ids:
        return f"env.id={rom}: " + _not_a_rom(rom, ids)
    if engine == "envpool" and rom not in envpool_roms():
        return f"env.id={rom}: EnvPool ships no ROM {rom} ({len(envpool_roms())} ROMs; ale-py has it: env.engine=ale)"
    return _probe_actions(rom, "full" if full_action_space else "minimal", engine == "envpool")


def _probe_actions(rom: str, action_set: str, envpool: bool) -> int | str:
    """The action count read in a child process, or why it could not be."""
    script, who, ships = (_ENVPOOL_PROBE, "EnvPool", "EnvPool") if envpool else (_PROBE, "ALE", "ale-py")
    args = [sys.executable, "-c", script, task_id(rom) if envpool else rom, action_set]
    try:
        p = subprocess.run(args, check=False, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"env.id={rom}: {who} did not load this ROM within 300 s"
    if p.returncode != 0:
        lines = p.stderr.splitlines()[:: -1 if envpool else 1]  # ALE's reason comes first, Python's error last
        why = next((ln.strip() for ln in lines if ln.strip()), "no message")
        why = re.sub(r'"[^"]*[/\\]', '"', why)[:200]  # ROM path -> file name
        return f"env.id={rom}: {ships} ships this ROM but {who} cannot load it (exit {p.returncode}: {why})"
    return int(p.stdout.split()[-1])  # last line: ALE_ROMS_DIR makes ale-py print before it


def rom_of(env_id: str) -> str | None:
    """The ROM ale-py ships that a gymnasium ALE id names (ALE/MsPacman-v5 -> ms_pacman), if any."""
    from ale_py import roms  # lazy: keeps ale_py off the start

    snake = _snake_rom(env_id)
    return snake if snake in roms.get_all_rom_ids() else None


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
    return (
        f"not an ALE ROM name; {hint}ROMs are snake_case, e.g. pong, breakout, space_invaders, ms_pacman "
        f"({len(ids)} in ale-py); a gymnasium id needs env.kind=gym"
    )
