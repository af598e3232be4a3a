"""The environment as the run's input: MLflow's "Datasets used" column names it, so a user can
filter and group runs by the environment they consumed (RL has no dataset; its env is the data).

The digest identifies the environment's settings (id, frameskip, stack, observation size,
no-ops, action set, FIRE at reset, sticky actions, episode rules: every EnvConfig field) and
the emulator's version: two runs with the same digest stepped the same environment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version

from mlflow.data.http_dataset_source import HTTPDatasetSource
from mlflow.data.meta_dataset import MetaDataset

from rlbench.config.schema import EnvConfig


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def env_source_url(env: EnvConfig) -> str:
    """Where the environment is documented: ALE's page for an Atari game, gymnasium's site otherwise."""
    if env.kind == "atari":
        return f"https://ale.farama.org/environments/{env.id.replace('_', '')}/"
    return "https://gymnasium.farama.org/"


def env_dataset(env: EnvConfig) -> MetaDataset:
    package = "ale-py" if env.kind == "atari" else "gymnasium"
    settings = asdict(env) | {package: _package_version(package)}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    name = f"{env.id} ({env.kind}, frameskip {env.frameskip})"
    return MetaDataset(source=HTTPDatasetSource(url=env_source_url(env)), name=name, digest=digest)
