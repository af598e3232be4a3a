"""The tracking store around the jobs: the experiment, a job's identity, stale runs.

`use_store`/`store_uri` (the store a command uses), `open_experiment`, `bound_http_retries` (a
dead server fails a job in about a minute), `schema_problem` (another MLflow's SQLite schema),
`config_hash`/`run_name_from` (what a job is and is called), `mark_stale_runs`. docs/metrics.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import sqlite3
import sys
import tempfile
import urllib.parse
from dataclasses import asdict
from pathlib import Path

import mlflow
from alembic.script import ScriptDirectory

from rlbench.config.schema import TrackingConfig
from rlbench.core.env_families import without_added_fields
from rlbench.tracking import artifacts
from rlbench.tracking.artifacts import SCHEME, store_root
from rlbench.tracking.orphans import close_orphans
from rlbench.tracking.ui_app import APP_NAME
from rlbench.tracking.unmeasured import TAG as UNMEASURED
from rlbench.tracking.unmeasured import format_unmeasured
from rlbench.tracking.views import view_link

log = logging.getLogger(__name__)


def run_name_from(overrides: list[str]) -> str:
    """A run's name: its overrides, less where results go and how progress shows."""
    skip = ("hydra", "tracking.", "progress=")
    task = [o for o in overrides if not o.lstrip("+~").startswith(skip)]
    return " ".join(task) if task else "defaults"


def unique_top_level_name(experiment_id: str, name: str) -> str:
    """`name`, or `name #k` (k = 2, 3, ...) when top-level runs of the experiment already use it:
    two single runs of `workload=smoke` must not look like one in the runs table. (A sweep's
    jobs are told apart by their parent.)"""
    runs = mlflow.search_runs(
        [experiment_id],
        filter_string=f"attributes.run_name LIKE '{_like(name)}%'",
        output_format="list",
        max_results=1000,
    )
    taken = {r.info.run_name for r in runs if "mlflow.parentRunId" not in r.data.tags}
    if name not in taken:
        return name
    k = 2
    while f"{name} #{k}" in taken:
        k += 1
    return f"{name} #{k}"


def _like(text: str) -> str:
    """A LIKE prefix that matches at least `text`: up to its first quote (`_` and `%` match
    more too); the exact names are picked out after."""
    return text.split("'")[0].split('"')[0]


# MLflow's own threads: the system-metrics sampler and the async logging queue (MLFLOW_ENABLE_ASYNC_LOGGING)
_THREADS = ("mlflow.system_metrics", "mlflow.utils.async_logging")


def _no_traceback(record: logging.LogRecord) -> bool:
    """Off the terminal: a record with a traceback, and what MLflow's own threads say of their
    failed writes (one line a sample or a batch while the store takes none: the job's own line
    names the cause)."""
    return not record.exc_info and not record.name.startswith(_THREADS)


class FirstLine(logging.Formatter):
    """A terminal's formatter that keeps the first line of each record: no SQL and parameters
    from SQLAlchemy's errors (the log file keeps them whole)."""

    def __init__(self, inner: logging.Formatter | None):
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return self.inner.format(record).split("\n", 1)[0]


def mlflow_info_to_log_file() -> None:
    """MLflow's INFO lines (tables created, system metrics started and stopped) and the
    tracebacks it logs (e.g. each failed write to a full disk) go to the log files the process
    has (Hydra's job log), not the terminal; its other warnings and errors still show there, one
    line each."""
    mlflow_log = logging.getLogger("mlflow")
    for handler in mlflow_log.handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)
            if _no_traceback not in handler.filters:
                handler.addFilter(_no_traceback)
            if not isinstance(handler.formatter, FirstLine):
                handler.setFormatter(FirstLine(handler.formatter))
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and handler not in mlflow_log.handlers:
            mlflow_log.addHandler(handler)


def use_store(uri: str) -> None:
    """Read and write the store at `uri` from now on (a command's --tracking-uri), with no
    progress bars on artifact downloads (a profile's or a sweep's tables)."""
    mlflow_info_to_log_file()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    bound_http_retries()
    mlflow.set_tracking_uri(uri)


# MLflow's defaults retry a failed request 7 times with doubling waits, each try waiting up to
# 120 s for an answer: a tracking server that went away holds a job or a command for minutes
# with no message. Ours: 2 retries (waits of ~0 and ~4 s), 20 s per try. A user's own setting wins.
HTTP_RETRY_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}


def bound_http_retries() -> None:
    """Bound MLflow's HTTP retries for this process and its children (the jobs of a sweep),
    where the user has not set them."""
    for name, value in HTTP_RETRY_ENV.items():
        os.environ.setdefault(name, value)


def store_uri() -> str:
    """The store's address as MLflow resolved it (for messages)."""
    return mlflow.get_tracking_uri()


def open_experiment(tracking: TrackingConfig) -> str:
    """Point MLflow at the configured store and return the experiment id (created if new)."""
    if tracking.uri.startswith("sqlite:///") and not tracking.uri.startswith("sqlite:////"):
        Path(tracking.uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    mlflow_info_to_log_file()
    bound_http_retries()
    mlflow.set_tracking_uri(tracking.uri)
    with first_open(tracking.uri):
        exp = mlflow.get_experiment_by_name(tracking.experiment)
    if exp is not None:
        return exp.experiment_id
    try:
        return mlflow.create_experiment(tracking.experiment, artifact_location=artifact_location(tracking))
    except mlflow.exceptions.MlflowException:
        exp = mlflow.get_experiment_by_name(tracking.experiment)  # another worker created it meanwhile
        if exp is None:
            raise
        return exp.experiment_id


def log_alone(
    uri: str, experiment: str, name: str, tags: dict[str, str], metrics: dict[str, float], nulls: dict[str, str]
) -> str:
    """One finished run of `experiment` at `uri` holding `metrics` (and `nulls`, each value not
    measured with its reason, in the `unmeasured` tag): a value measured outside any job (a GPU
    sweep's idle power: rlbench/sweeps/warm.py). Its run id."""
    exp = open_experiment(TrackingConfig(uri=uri, experiment=experiment))
    client = mlflow.MlflowClient()
    run = client.create_run(exp, run_name=name, tags=tags | ({UNMEASURED: format_unmeasured(nulls)} if nulls else {}))
    for key, value in metrics.items():
        client.log_metric(run.info.run_id, key, float(value))
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


@contextlib.contextmanager
def first_open(uri: str):
    """Around a process's first access to a SQLite store: one process at a time on this host.

    MLflow creates a new database's tables on first access, with no lock of its own: two jobs
    (or a sweep and a job) starting at once into a new store both run the migrations, and one
    fails (`duplicate column name`). A lock file in the temp folder, named by the database's
    path, serialises them; the second finds the tables made. Other stores: nothing to do."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri.removeprefix("sqlite:///").split("?", 1)[0]).resolve()
    name = hashlib.sha256(str(db).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"rlbench-store-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def schema_problem(db: Path) -> tuple[str, str] | None:
    """(cause, what to do) when the SQLite MLflow database `db` has a schema this MLflow does not
    use (older: `mlflow db upgrade`; newer or unknown: another MLflow wrote it), else None.
    Read with sqlite3: MLflow itself would raise only after opening the store."""
    from mlflow.store.db.utils import (  # lazy: keeps mlflow.store.db (SQLAlchemy, alembic: 1.6 s) off the start
        _get_alembic_config,
        _get_latest_schema_revision,
    )

    conn = sqlite3.connect(f"{db.absolute().as_uri()}?mode=ro", uri=True, timeout=20)
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    finally:
        conn.close()
    found, head = (rows[0][0] if rows else None), _get_latest_schema_revision()
    if found == head:
        return None

    known = {r.revision for r in ScriptDirectory.from_config(_get_alembic_config("")).walk_revisions()}
    if found in known:
        return (
            f"its MLflow schema is older (revision {found}) than this MLflow {mlflow.__version__} uses ({head})",
            f"back it up, then upgrade it: mlflow db upgrade sqlite:///{db}",
        )
    newer = f"its MLflow schema (revision {found}) is unknown to this MLflow {mlflow.__version__}: a newer one wrote it"
    return newer, "upgrade MLflow here (pip install -U mlflow), or use another store"


def artifact_location(tracking: TrackingConfig) -> str | None:
    """Where a new experiment keeps artifacts.

    - a tracking server: None, so the server proxies them (`mlflow server --artifacts-destination`);
      a local path would exist only on this host;
    - a SQLite store, no location or a relative one: `rlbench-store:/<folder>`, a folder next to
      the database (mlruns/<experiment>/ by default) that moves with it (rlbench/tracking/artifacts.py);
    - an absolute path or another URI: as given (an absolute path does not move with the store).
    """
    location = tracking.artifact_location
    if tracking.uri.startswith(("http://", "https://")):
        return location if location and "://" in location else None
    if location and ("://" in location or Path(location).is_absolute()):
        return Path(location).as_uri() if "://" not in location else location
    if store_root(tracking.uri) is None:  # e.g. a postgresql:// store used directly
        return Path(location).resolve().as_uri() if location else None
    folder = location.strip("/") if location else _folder_name(tracking.experiment)
    return f"{SCHEME}:/{folder}"


def artifact_problem(tracking: TrackingConfig) -> str | None:
    """Why the experiment's artifact location cannot be written on this host (a job's record
    would be incomplete), or None: a local folder is created if missing and a file written and
    removed in it; a server's or a remote location is not checked here. Asked before any run
    exists; opens no store that does not exist yet."""
    location = _experiment_location(tracking)
    if location and location.startswith(f"{SCHEME}:") and not artifacts.scheme_registered():
        return (
            f"tracking.artifact_location: the artifacts of experiment {tracking.experiment!r} go to "
            f"{location}, which MLflow opens through rlbench's entry point, and rlbench is not installed "
            f"in this Python ({sys.executable}); allowed: pip install -e . in the clone (or pip install .), "
            "or an absolute tracking.artifact_location=PATH for a new tracking.experiment"
        )
    folder = _local_folder(location, tracking.uri) if location else None
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".rlbench-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return (
            f"tracking.artifact_location: the artifacts of experiment {tracking.experiment!r} go to {folder} "
            f"({location}), which cannot be written: {e.strerror or e}; allowed: a writable folder "
            "(tracking.artifact_location=PATH, or a new tracking.experiment)"
        )
    return None


def _experiment_location(tracking: TrackingConfig) -> str | None:
    """The artifact location of the experiment, existing or to be created (artifact_location)."""
    db = store_root(tracking.uri)
    exists = db is None or Path(urllib.parse.unquote(tracking.uri.removeprefix("sqlite:///").split("?", 1)[0])).exists()
    if exists:
        mlflow.set_tracking_uri(tracking.uri)
        exp = mlflow.get_experiment_by_name(tracking.experiment)
        if exp is not None:
            return exp.artifact_location
    return artifact_location(tracking)


def _local_folder(location: str, uri: str) -> Path | None:
    """The folder of a local artifact location (rlbench-store:, file:, a path); None for others."""
    if location.startswith(f"{SCHEME}:"):
        root = store_root(uri)
        return root / urllib.parse.urlparse(location).path.lstrip("/") if root is not None else None
    if location.startswith("file:"):
        return Path(urllib.parse.unquote(urllib.parse.urlparse(location).path))
    return Path(location) if "://" not in location and Path(location).is_absolute() else None


def _folder_name(experiment: str) -> str:
    """A folder name for an experiment's artifacts: its name, with anything but letters,
    digits, '.', '_' and '-' replaced by '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", experiment).strip(".") or "experiment"


def config_hash(conf) -> str:
    """Identity of a job's work: the typed config without tracking, progress, resume, repeats,
    dry_run, verdict, sweep and packing (pack where 1)."""

    d = asdict(conf)
    for key in ("tracking", "progress", "resume", "repeats", "dry_run", "verdict", "sweep", "packing"):
        d.pop(key, None)
    if d.get("pack") == 1:
        d.pop("pack")  # one job alone: left out, so the hash equals a record's before packs existed
    if not d.get("actor_procs") and not d.get("actor_hosts") and not d.get("actor_server", {}).get("remote_envs"):
        d.pop("actor_procs", None)  # in-process actors: left out, so the hash equals a record's without them
        d.pop("actor_server", None)
    if not d.get("actor_hosts"):  # no actor tasks on other nodes: left out, likewise
        d.pop("actor_hosts", None)
        d.pop("actor_launch", None)
    if d.get("precision") == "fp32":
        d.pop("precision", None)  # the default: left out, so records without the key keep their hash
    if d.get("hot_path", {}).get("memory_format") == "auto":
        d["hot_path"].pop("memory_format")  # the default: a layout, not the work (earlier records keep their hash)
    if set(d.get("hot_path", {}).values()) <= {"eager"}:
        d.pop("hot_path", None)  # likewise: eager everywhere is the path before the key existed
    if isinstance(d.get("env"), dict):
        d["env"] = without_added_fields(d["env"])  # a family's later fields at their earlier value
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def mark_stale_runs(tracking: TrackingConfig) -> list[str]:
    """Runs left RUNNING by a process that is gone, in every experiment of the store (not only
    `tracking.experiment`), closed: KILLED at once when their owner process of this host is
    gone, FAILED after `tracking.stale_after_s` without a heartbeat otherwise
    (rlbench/tracking/orphans.py). Returns their ids."""
    return list(close_orphans(tracking.stale_after_s))


def ui_runs_url(uri: str, experiment_id: str, view_key: str, port: int = 5000) -> str:
    """Where the MLflow UI shows a sweep's or search's runs: the experiment's runs table in its
    "Model training" view, opened on the shared view `view_key` (rlbench/tracking/views.py: the
    parent's children, shortest task first, with their swept knobs and headline numbers as
    columns). A local store's UI is what `mlflow ui --port <port>` serves (tracking.ui_port); a
    tracking server is its own UI."""

    base = uri.rstrip("/") if uri.startswith(("http://", "https://")) else f"http://127.0.0.1:{port}"
    return f"{base}/{view_link(experiment_id, view_key)}"


def ui_command(uri: str, port: int = 5000) -> str:
    """The command that serves a local store's UI on `port`: MLflow's UI as rlbench's `mlflow.app`
    (rlbench/tracking/ui_app.py: every page in the "Model training" view for a browser that never
    chose one)."""
    flag = "" if port == 5000 else f" --port {port}"
    return f"mlflow ui --app-name {APP_NAME} --backend-store-uri {uri}{flag}"


def ui_hint(uri: str, experiment_id: str, view_key: str, port: int = 5000) -> str:
    """The line a sweep or a search prints at its end: the URL, and how to start the UI for a
    local store on the same port (tracking.ui_port sets both)."""
    start = "" if uri.startswith(("http://", "https://")) else f" (start it: {ui_command(uri, port)})"
    return f"MLflow UI: {ui_runs_url(uri, experiment_id, view_key, port)}{start}"
