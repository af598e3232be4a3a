"""Artifacts that move with their store: the `rlbench-store:` artifact scheme.

A SQLite store's experiments get the location `rlbench-store:/<experiment id>`, relative to the
database's folder; this repository (an `mlflow.artifact_repository` entry point) resolves it
against the store in use, so a copied `mlruns/` keeps its artifacts. docs/metrics.md, "Experiments".
"""

from __future__ import annotations

import os
import urllib.parse
from importlib.metadata import entry_points
from pathlib import Path

import mlflow
from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

SCHEME = "rlbench-store"
_SERVER_STORE_ENV = "_MLFLOW_SERVER_FILE_STORE"  # what `mlflow ui/server` exports to its workers


def scheme_registered() -> bool:
    """Whether MLflow can open `rlbench-store:` locations here: it finds this repository through
    rlbench's installed entry point (pyproject's mlflow.artifact_repository), which a clone run
    without installing it (PYTHONPATH only) does not have."""

    return any(ep.name == SCHEME for ep in entry_points(group="mlflow.artifact_repository"))


def store_root(tracking_uri: str | None) -> Path | None:
    """The folder holding a SQLite store's database; None for any other kind of store."""
    if not tracking_uri or not tracking_uri.startswith("sqlite:///"):
        return None
    db = tracking_uri.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(urllib.parse.unquote(db)).resolve().parent  # sqlite:////abs has a leading "/" left


def _current_store(tracking_uri: str | None) -> str | None:
    if tracking_uri and tracking_uri.startswith("sqlite:"):
        return tracking_uri
    if os.environ.get(_SERVER_STORE_ENV, "").startswith("sqlite:"):
        return os.environ[_SERVER_STORE_ENV]

    return mlflow.get_tracking_uri()


class StoreRelativeArtifactRepository(LocalArtifactRepository):
    """A local artifact folder named relative to its SQLite store's folder (docs/metrics.md)."""

    def __init__(self, artifact_uri: str, tracking_uri: str | None = None, registry_uri: str | None = None):
        root = store_root(_current_store(tracking_uri))
        if root is None:
            raise ValueError(
                f"artifact URI {artifact_uri!r} is relative to a SQLite store, but this process "
                f"talks to {_current_store(tracking_uri)!r}"
            )
        super().__init__(artifact_uri, tracking_uri, registry_uri)
        relative = urllib.parse.urlparse(artifact_uri).path.lstrip("/")
        self._artifact_dir = str(root / relative)
