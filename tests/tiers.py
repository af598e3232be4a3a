"""pytest plugin (pyproject's addopts `-p tests.tiers`): the fast tier on a worker per core.

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
    paths = any(os.path.exists(a.split("::")[0]) for a in args if not a.startswith("-"))
    if marker != FAST_TIER or asked or paths or cores < 2 or not have_xdist:
        return args
    return [*args, *PARALLEL]


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args: list[str]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    new = fast_tier_args(args, cores, importlib.util.find_spec("xdist") is not None)
    if new != args:
        args[:] = new
        early_config.stash[NOTE] = f"fast tier: {shlex.join(PARALLEL)} ({cores} cores; docs/testing.md)"


def pytest_sessionstart(session) -> None:
    """The note first, through pytest's own writer (output is captured while args are read)."""
    note = session.config.stash.get(NOTE, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if note and reporter is not None:
        reporter.write_line(note)
