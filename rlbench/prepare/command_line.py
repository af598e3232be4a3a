"""The command line of `python -m rlbench` (and of the pipelines, which run it) checked before
Hydra runs: composed once as Hydra will compose it, so that a bad key, preset, value type or
mode is one message (exit 2) and Hydra creates no output folder for it (docs/jobs.md)."""

from __future__ import annotations

import contextlib
import math

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import DictConfig

from rlbench.config.rules import ConfigError
from rlbench.config.schema import Config
from rlbench.prepare.compose import compose_checked
from rlbench.prepare.preflight import job_store_problem
from rlbench.prepare.validate import validate

MULTIRUN = ("-m", "--multirun")


def mode_problem(cfg: DictConfig, grid: dict | None, choices: dict) -> str | None:
    """What a run without -m cannot do: a search, repeats, a dry run, or an experiment preset's
    grid (which would silently run one job of it)."""
    if cfg.get("search") is not None:
        return "search=... runs an Optuna study over many jobs: add -m (python -m rlbench -m search=ratio)"
    if cfg.get("repeats", 1) > 1:
        return (
            f"repeats={cfg.repeats} runs every configuration {cfg.repeats} times as one sweep: add -m "
            f"(python -m rlbench -m repeats={cfg.repeats} ...)"
        )
    if cfg.get("dry_run"):
        return (
            "dry_run=true prints the SLURM submission of a sweep, submitting nothing: add -m "
            "(python -m rlbench -m hydra/launcher=slurm dry_run=true ...)"
        )
    if grid:
        jobs = math.prod(len(str(v).split(",")) for v in grid.values())
        preset = f"experiment={choices['experiment']}" if choices.get("experiment") else "the config"
        axes = " ".join(f"{k}={v}" for k, v in grid.items())
        return (
            f"{preset} defines a grid ({axes}: {jobs} jobs) that a run without -m would cut to one job: "
            f"add -m (python -m rlbench -m {preset})"
        )
    return None


def precheck(argv: list[str], stores: bool = False) -> str | None:
    """The command line composed as Hydra will compose it (a sweep's lists left to the sweeper,
    which checks every job): a bad key, preset, value type or mode, as one message; else None.
    stores: a single run's stores too (job_store_problem), so that a refused store leaves no
    output folder either (a sweep checks its stores before Hydra makes its folder)."""
    return checked_command_line(argv, stores)[0]


def checked_command_line(argv: list[str], stores: bool = False) -> tuple[str | None, dict[tuple[str, ...], Config]]:
    """precheck's problem, and a single run's validated config by its job's overrides (the
    command line less Hydra's own, as Hydra records them: rlbench/prepare/job.py handing)."""

    multirun = any(a in MULTIRUN for a in argv)
    if any(a.startswith("-") and a not in MULTIRUN for a in argv):
        return None, {}  # Hydra's own flags (--cfg, --help, ...): Hydra handles them
    overrides = [a for a in argv if a not in MULTIRUN]
    if multirun:  # the sweeper composes each job of a list; here the rest, once
        parser = OverridesParser.create()
        # an override that cannot be parsed stays: compose_checked names it
        with contextlib.suppress(OverrideParseException):
            overrides = [o for o in overrides if not parser.parse_overrides([o])[0].is_sweep_override()]
    try:
        cfg = compose_checked(overrides, hydra_node=True)
    except ConfigError as e:
        return str(e), {}
    if multirun:
        return None, {}
    problem = mode_problem(cfg, cfg.hydra.sweeper.get("params"), cfg.hydra.runtime.choices)
    if problem is not None:
        return problem, {}
    try:  # a single run's values too, so that Hydra makes no output folder for a refused one
        config = validate(cfg)  # validate leaves out the Hydra node: the job's config, not composed again
    except ConfigError as e:
        return str(e), {}
    job = tuple(o.input_line for o in OverridesParser.create().parse_overrides(overrides) if not o.is_hydra_override())
    return (job_store_problem(config.tracking) if stores else None), {job: config}
