"""A Hydra multirun's grid as jobs, each composed and validated before any job starts.

Light on purpose (no MLflow, no trainer): a sweep with one bad job is refused in seconds,
before the heavy imports its jobs need. (torch is imported only where a job passes its rules
and its compute limit must be checked against the device.)
"""

from __future__ import annotations

import sys

from rlbench.config.validate import ConfigError, validate


def expand_jobs(sweeper, arguments: list[str]) -> list[list[str]]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = sweeper._parse_config() + list(arguments)
    overrides = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader).parse_overrides(params)
    return [list(job) for batch in sweeper.split_arguments(overrides, None) for job in batch]


def validate_jobs(sweeper, jobs: list[list[str]]) -> list:
    """Typed configs of every job; prints every bad job and exits 2 if any is invalid."""
    loader, confs, problems = sweeper.hydra_context.config_loader, [], []
    for job in jobs:
        try:
            confs.append(validate(loader.load_sweep_config(master_config=sweeper.config, sweep_overrides=job)))
        except ConfigError as e:
            problems.append(f"job [{' '.join(job)}]: {e}")
    if problems:
        print("rlbench: no job started; invalid jobs in the sweep:\n" + "\n".join(problems), file=sys.stderr)
        sys.exit(2)
    return confs
