"""Artifacts that move with their store: the `rlbench-store:` artifact scheme.

MLflow turns every local artifact location into an absolute path when it records an
experiment or a run, so a copied or moved `mlruns/` (or checkout) points back at the old
place: the UI shows no artifacts there and the report would write into the old folder. For a
SQLite store rlbench creates its experiments with the location `rlbench-store:/<experiment id>`
instead: a path relative to the folder that holds the database (mlruns/ by default). This
repository (registered with MLflow as an `mlflow.artifact_repository` entry point, so the
client, `mlflow ui`, the report and the notebook all use it) resolves that path against the
store the process is talking to: the tracking URI the client passes, the store of an
`mlflow ui`/`mlflow server` process, or the current tracking URI.

Stores recorded before this (absolute file locations) keep working unchanged.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

SCHEME = "rlbench-store"
_SERVER_STORE_ENV = "_MLFLOW_SERVER_FILE_STORE"  # what `mlflow ui/server` exports to its workers


def scheme_registered() -> bool:
    """Whether MLflow can open `rlbench-store:` locations here: it finds this repository through
    rlbench's installed entry point (pyproject's mlflow.artifact_repository), which a clone run
    without installing it (PYTHONPATH only) does not have."""
    from importlib.metadata import entry_points

    return any(ep.name == SCHEME for ep in entry_points(group="mlflow.artifact_repository"))


def store_root(tracking_uri: str | None) -> Path | None:
    """The folder holding a SQLite store's database; None for any other kind of store."""
    if not tracking_uri or not tracking_uri.startswith("sqlite:///"):
        return None
    db = tracking_uri.removeprefix("sqlite:///").split("?", 1)[0]
    return Path(urllib.parse.unquote(db)).resolve().parent  # sqlite:////abs has a leading "/" left


def relative_location(experiment_id: str | None = None) -> str:
    """The artifact location of a new experiment in a SQLite store (the id is MLflow's; a
    name-based folder keeps a new experiment's artifacts apart until it has one)."""
    return f"{SCHEME}:/{experiment_id}" if experiment_id else f"{SCHEME}:/"


def _current_store(tracking_uri: str | None) -> str | None:
    if tracking_uri and tracking_uri.startswith("sqlite:"):
        return tracking_uri
    if os.environ.get(_SERVER_STORE_ENV, "").startswith("sqlite:"):
        return os.environ[_SERVER_STORE_ENV]
    import mlflow

    return mlflow.get_tracking_uri()


class StoreRelativeArtifactRepository(LocalArtifactRepository):
    """A local artifact folder named relative to its SQLite store's folder (see module doc)."""

    def __init__(self, artifact_uri: str, tracking_uri: str | None = None, registry_uri: str | None = None):
        root = store_root(_current_store(tracking_uri))
        if root is None:
            raise ValueError(f"artifact URI {artifact_uri!r} is relative to a SQLite store, but this process "
                             f"talks to {_current_store(tracking_uri)!r}")
        super().__init__(artifact_uri, tracking_uri, registry_uri)
        relative = urllib.parse.urlparse(artifact_uri).path.lstrip("/")
        self._artifact_dir = str(root / relative)
