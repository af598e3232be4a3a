"""The command line of `python -m rlbench` (and of the pipelines, which run it) checked before
Hydra makes any folder: composed once as Hydra composes it, so that a bad key, preset, value
type, value, mode or store is one message (exit 2) and no output folder exists for it; a single
run goes on from that one composition (docs/jobs.md, docs/architecture.md)."""

from __future__ import annotations

import contextlib
import math

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig

from rlbench.config.rules import ConfigError
from rlbench.config.schema import Config
from rlbench.core.errors import Refusal
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
    if cfg.get("pack", 1) > 1 and cfg.get("packing", {}).get("id") is None:
        return (
            f"pack={cfg.pack} runs {cfg.pack} jobs at once as one sweep, which starts them together: add -m "
            f"(python -m rlbench -m pack={cfg.pack} ...)"
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
    """checked_command_line's refusal as one message (a bad key, preset, value type, value, mode
    or, with `stores`, store); else None."""
    try:
        checked_command_line(argv, stores)
    except Refusal as e:  # ConfigError is one
        return str(e)
    return None


def checked_command_line(argv: list[str], stores: bool = False) -> tuple[DictConfig, Config] | None:
    """A single run's command line composed once, with Hydra's node, as Hydra's run composes it,
    and validated once: (the composed config, the typed one); Hydra's run_job makes the job's
    folder from the first (rlbench/cli/run.py main). Refused (ConfigError, Refusal: its
    stores, with `stores`) before any folder exists. None where Hydra runs the command: its own
    flags (--cfg, --help, ...), or -m (the rest composed and refused here; the sweeper checks each job)."""
    multirun = any(a in MULTIRUN for a in argv)
    if any(a.startswith("-") and a not in MULTIRUN for a in argv):
        return None  # Hydra's own flags: Hydra handles them
    overrides = [a for a in argv if a not in MULTIRUN]
    if multirun:  # the sweeper composes each job of a list; here the rest, once
        parser = OverridesParser.create()
        # an override that cannot be parsed stays: compose_checked names it
        with contextlib.suppress(OverrideParseException):
            overrides = [o for o in overrides if not parser.parse_overrides([o])[0].is_sweep_override()]
    cfg = compose_checked(overrides, hydra_node=True)
    if multirun or cfg.hydra.mode == RunMode.MULTIRUN:  # hydra.mode=MULTIRUN: Hydra's multirun, as -m
        return None
    problem = mode_problem(cfg, cfg.hydra.sweeper.get("params"), cfg.hydra.runtime.choices)
    if problem is not None:
        raise ConfigError(problem)
    config = validate(cfg)  # validate leaves out the Hydra node
    problem = job_store_problem(config.tracking) if stores else None
    if problem is not None:
        raise Refusal(problem)
    return cfg, config
