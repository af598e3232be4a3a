"""The environment as the run's input: MLflow's "Datasets used" names it (RL's data is its env),
so runs can be filtered and grouped by it. The digest covers every field of the family's schema
and the version of its PACKAGE; the source is the family's source_url. docs/metrics.md, "Input".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from mlflow.data.http_dataset_source import HTTPDatasetSource
from mlflow.data.meta_dataset import MetaDataset

from rlbench.core.env_families import family, without_added_fields


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def env_dataset(env, declared: ModuleType | None = None) -> MetaDataset:
    """The env (a family's Schema) as an MLflow dataset: name, its family's source, digest.
    `declared`: its env family, where the caller has it (a job's plan), else found by env.kind."""
    declared = declared or family(env.kind)
    settings = without_added_fields(asdict(env)) | {declared.PACKAGE: _package_version(declared.PACKAGE)}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8]
    name = f"{env.id} ({env.kind}, frameskip {env.frameskip})"
    return MetaDataset(source=HTTPDatasetSource(url=declared.source_url(env)), name=name, digest=digest)
