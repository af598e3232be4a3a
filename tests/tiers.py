"""The whole suite and the fast tier on a worker per core (hooked in tests/conftest.py).

`python -m pytest -q` and `python -m pytest -q -m "not e2e"`, with no test path and no `-n`,
get pytest-xdist's `-n auto --dist loadfile` where the host has two cores or more: a file's
tests share one process's fixtures and compose caches. The files go to the workers longest
first (`by_weight`). Any other selection runs as asked. docs/testing.md, "The tiers"."""

from __future__ import annotations

import importlib.util
import os
import shlex

import pytest

WHOLE = (None, "not e2e")  # the -m of the selections that run in parallel: the whole suite, the fast tier
PARALLEL = ["-n", "auto", "--dist", "loadfile"]
NOTE = pytest.StashKey[str]()


def parallel_args(args: list[str], cores: int, have_xdist: bool) -> list[str]:
    """`args` with PARALLEL added when they select exactly the whole suite or the whole fast tier."""
    marker = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-m"), None)
    marker = marker or next((a[2:] for a in args if a.startswith("-m") and len(a) > 2), None)
    asked = any(
        a in ("-n", "--numprocesses", "--dist", "no:xdist") or a.startswith(("-n", "--numprocesses=", "--dist="))
        for a in args
        if a != "-m" and not a.startswith("-m")
    )
    values = {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-m", "-p", "-k", "--durations")}
    paths = any(
        os.path.exists(a.split("::")[0]) or "::" in a or "/" in a or a.endswith(".py")
        for a in args
        if not a.startswith("-") and a not in values
    )
    keyword = any(a == "-k" or a.startswith("-k") for a in args)
    if marker not in WHOLE or asked or paths or keyword or cores < 2 or not have_xdist:
        return args
    return [*args, *PARALLEL]


def parallel_tiers(config) -> None:
    """From tests/conftest.py's pytest_cmdline_main, before pytest-xdist reads its options."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    args = list(config.invocation_params.args)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if parallel_args(args, cores, importlib.util.find_spec("xdist") is not None) != args:
        config.option.numprocesses, config.option.dist = "auto", "loadfile"
        config.option.loadscopereorder = False  # by_weight's order, not xdist's (most tests first)
        config.stash[NOTE] = f"{shlex.join(PARALLEL)}, longest files first ({cores} cores; docs/testing.md)"


def weight(items: list) -> tuple[int, int, int]:
    """A file's place in the workers' queue, heaviest first: one that trains for real (`slow`),
    then by its end-to-end tests (each a job, sweep or server: seconds to minutes), then by its
    number of tests. A guess from the marks; it decides only the balance, not what runs."""
    marks = [{m.name for m in item.iter_markers()} for item in items]
    return (sum("slow" in m for m in marks), sum("e2e" in m for m in marks), len(items))


def by_weight(items: list) -> list:
    """`items` grouped by file, the files by descending weight, each file's tests in its order."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ranked = sorted(files.values(), key=weight, reverse=True)  # stable: ties keep collection order
    return [item for group in ranked for item in group]


def say_parallel(session) -> None:
    """The note first, through pytest's own writer."""
    note = session.config.stash.get(NOTE, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if note and reporter is not None:
        reporter.write_line(note)


def lacks_gpu_marker(item) -> bool:
    """A test skipped where no CUDA device is (a skipif naming CUDA) without the `gpu` marker:
    `pytest -m gpu` on a GPU host would leave it out (tests/conftest.py refuses to collect it)."""
    marks = list(item.iter_markers())
    cuda = any(m.name == "skipif" and "cuda" in str(m.kwargs.get("reason", "")).lower() for m in marks)
    return cuda and not any(m.name == "gpu" for m in marks)
