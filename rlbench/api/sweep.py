"""`rlbench.sweep(overrides)` and `rlbench.search(overrides)`: `python -m rlbench -m ...` in the
calling process, through Hydra's multirun and rlbench's sweeper as the command runs it, returning
the sweep's or the search's result (its parent run, rows and verdict) instead of an exit code.
A refusal raises its typed error (rlbench/core/errors.py) before any job. docs/usage.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence

from rlbench.api.task import task
from rlbench.config.schema import register_configs
from rlbench.core.errors import Carried, Refusal
from rlbench.prepare import hydra_private
from rlbench.prepare.command_line import precheck
from rlbench.prepare.compose import CONF_DIR
from rlbench.searches.run import SearchResult
from rlbench.sweeps.sweep import SweepFailed, SweepResult


@contextlib.contextmanager
def _kept_logging() -> Iterator[None]:
    """The root logger's handlers and level as they were before Hydra configured its own."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def multirun(overrides: Sequence[str]):
    """The overrides checked as `python -m rlbench -m` checks them (keys, presets, values: a
    Refusal before any folder), then Hydra's multirun here: the sweeper's return value. A typed
    error carried through Hydra is raised as itself; a sweep some of whose jobs failed returns
    its result (status FAILED) rather than raising."""
    overrides = list(overrides)
    problem = precheck(["-m", *overrides])
    if problem:
        raise Refusal(problem)
    register_configs()
    try:
        with _kept_logging():
            return hydra_private.multirun(str(CONF_DIR), overrides, task)
    except Carried as c:
        if isinstance(c.error, SweepFailed):
            return c.error.result
        raise c.error from None


def sweep(overrides: Sequence[str] = ()) -> SweepResult | None:
    """A sweep of `overrides` (Hydra's grid syntax: `["actors=4,40", "repeats=3"]`; `resume=true`
    continues one), its jobs under one parent run: the SweepResult (None for dry_run=true, which
    prints the submission only). Refusal for a search's overrides: rlbench.search runs those."""
    if any(o.split("=", 1)[0].lstrip("+") == "search" and not o.endswith("=null") for o in overrides):
        raise Refusal(f"{' '.join(overrides)}: search= runs a search; allowed: rlbench.search(overrides)")
    result = multirun(overrides)
    return result if isinstance(result, SweepResult) else None


def search(overrides: Sequence[str] = ("search=ratio",)) -> SearchResult:
    """An Optuna search (`["search=ratio", "search.n_trials=4"]`), each trial a real job under the
    study's parent run: the SearchResult. Refusal without a `search=` preset."""
    if not any(o.split("=", 1)[0].lstrip("+") == "search" for o in overrides):
        raise Refusal(
            f"{' '.join(overrides) or '(nothing)'}: allowed: overrides with search=<preset>, e.g. search=ratio"
        )
    return multirun(overrides)
