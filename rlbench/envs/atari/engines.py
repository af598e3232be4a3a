"""The two engines that step Atari ROMs (env.engine): what each can run, checked before any work.

ale-py is always there (a dependency); EnvPool where its wheel installs (docs/envs.md, "Two
engines"). `engine_rules` refuses an unknown engine, EnvPool where it is not installed, and the
settings EnvPool cannot honour; `envpool_roms` lists its ROMs without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from rlbench.config.rules import Rules

ENGINES = ("ale", "envpool")
INSTALL = "pip install 'envpool>=1.2.5': a dependency of rlbench on x86_64 Linux only"


@functools.cache
def envpool_missing() -> str | None:
    """None if envpool and its ROMs are installed, else why not (one line)."""
    for name in ("envpool", "envpool_assets"):
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError) as e:  # a finder that refuses it; a module set to None
            return f"the package {name} cannot be imported ({e}; {INSTALL})"
        if not found:
            return f"the package {name} is not installed ({INSTALL})"
    return None


@functools.cache
def envpool_roms() -> tuple[str, ...]:
    """The ROM names EnvPool ships (envpool_assets/atari/roms/<rom>.bin)."""
    spec = importlib.util.find_spec("envpool_assets")
    if spec is None or not spec.submodule_search_locations:
        return ()
    folder = Path(next(iter(spec.submodule_search_locations))) / "atari" / "roms"
    return tuple(sorted(p.stem for p in folder.glob("*.bin")))


def _engine_rule() -> tuple:
    missing = envpool_missing()
    if missing is None:
        return (lambda v: v in ENGINES), "one of " + ", ".join(ENGINES)
    return (lambda v: v == "ale"), f"ale; envpool is not available here: {missing}"


def engine_rules(env) -> Rules:
    """env.engine's rule, and with env.engine=envpool the settings it cannot honour."""
    rules: Rules = {"env.engine": _engine_rule()}
    if env.engine != "envpool":
        return rules
    rules["env.noop_max"] = (
        (lambda v: v >= 1),
        "an integer >= 1 with env.engine=envpool (EnvPool draws 1..noop_max no-ops; 0 needs env.engine=ale)",
    )
    rules["env.episodic_life"] = (
        (lambda v: v is False),
        "false with env.engine=envpool (after a lost life EnvPool plays on with no-ops, ale-py "
        "resets the game: not the same episodes; true needs env.engine=ale)",
    )
    return rules
