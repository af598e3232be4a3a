"""The fast tier on a worker per core (hooked in tests/conftest.py).

`python -m pytest -q -m "not e2e"` with no test path and no `-n` gets pytest-xdist's
`-n auto --dist loadfile` where the host has two cores or more: one file's tests share one
process's compose caches. Any other selection runs as asked. docs/testing.md, "The tiers"."""

from __future__ import annotations

import importlib.util
import os
import shlex

import pytest

FAST_TIER = "not e2e"
PARALLEL = ["-n", "auto", "--dist", "loadfile"]
NOTE = pytest.StashKey[str]()


def fast_tier_args(args: list[str], cores: int, have_xdist: bool) -> list[str]:
    """`args` with PARALLEL added when they select exactly the whole fast tier."""
    marker = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-m"), None)
    marker = marker or next((a[2:] for a in args if a.startswith("-m") and len(a) > 2), None)
    asked = any(a in ("-n", "--numprocesses", "--dist", "no:xdist") or a.startswith(("-n", "--numprocesses=", "--dist="))
                for a in args if a != "-m" and not a.startswith("-m"))
    paths = any(os.path.exists(a.split("::")[0]) or "::" in a or "/" in a or a.endswith(".py")
                for a in args if not a.startswith("-"))
    if marker != FAST_TIER or asked or paths or cores < 2 or not have_xdist:
        return args
    return [*args, *PARALLEL]


def parallel_fast_tier(config) -> None:
    """From tests/conftest.py's pytest_cmdline_main, before pytest-xdist reads its options."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    args = list(config.invocation_params.args)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if fast_tier_args(args, cores, importlib.util.find_spec("xdist") is not None) != args:
        config.option.numprocesses, config.option.dist = "auto", "loadfile"
        config.stash[NOTE] = f"fast tier: {shlex.join(PARALLEL)} ({cores} cores; docs/testing.md)"


def say_parallel(session) -> None:
    """The note first, through pytest's own writer."""
    note = session.config.stash.get(NOTE, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if note and reporter is not None:
        reporter.write_line(note)
