"""The config a command works from, composed in one place: conf/ with the registered schemas
and the command's overrides, then (for a job) validated. `python -m rlbench` composes through
`@hydra.main` (rlbench/cli/run.py) on the same CONF_DIR; every other command (profile,
predict, pipelines, benchmarks) and the tests call these. docs/jobs.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from rlbench.config.rules import ConfigError
from rlbench.config.schema import Config, register_configs
from rlbench.prepare.argv import check_override_keys
from rlbench.prepare.hydra_errors import explain
from rlbench.prepare.validate import validate

# rlbench/conf: in a clone a link to the top-level conf/, in an installed wheel its copy
# (pyproject's package-data), so a non-editable install (an actor host's) composes too.
CONF_DIR = (Path(__file__).resolve().parents[1] / "conf").resolve()


def compose_config(overrides: Sequence[str], hydra_node: bool = False) -> DictConfig:
    """conf/config.yaml with `overrides`, as Hydra composes it for a job (not validated);
    hydra_node: with Hydra's own node (the sweeper's grid, the presets chosen)."""

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=hydra_node)


def compose_checked(overrides: Sequence[str], hydra_node: bool = False) -> DictConfig:
    """compose_config, with a bad key, preset, type or syntax refused as ConfigError naming the
    override, its value and what is allowed (not Hydra's exception): the check every command shares."""

    problem = check_override_keys(list(overrides), CONF_DIR)
    if problem:
        raise ConfigError(problem)
    try:
        return compose_config(overrides, hydra_node)
    except Exception as e:
        if not isinstance(e, HydraException | OmegaConfBaseException):
            raise
        raise ConfigError(explain(e, list(overrides), CONF_DIR, compose_config)) from None


def compose_job(overrides: Sequence[str], host: bool = True) -> Config:
    """The typed, validated config of the job `overrides` describe; raises ConfigError
    (rlbench/prepare/validate.py). host=False: for a job on another machine (no host checks)."""

    return validate(compose_checked(overrides), host=host)
