"""Preflight: can the tracking store and the study storage be used? Checked before any work.

Every command that opens a store calls `check(...)` first, in seconds (a server's /health and
one API call, a database's connection, a SQLite file: rlbench/prepare/store_files.py); a failure raises
PreflightError with one line, which the commands turn into exit code 2, nothing created.
docs/scale-out.md, "Preflight, inside"."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request

import sqlalchemy

from rlbench.config.rules import ConfigError
from rlbench.prepare.store_files import MLFLOW, OPTUNA, Kind, sqlite_path, sqlite_problem, tables

TIMEOUT_S = 5.0
TRACKING_KEY, STORAGE_KEY = "tracking.uri", "search.storage"
DRIVERS = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient", "pymysql": "PyMySQL"}


class PreflightError(ConfigError):
    """A tracking store or study storage that cannot be used; raised before any work.
    Its text: `<key>=<url>: <cause>; <what to do>`, the URL's password masked."""

    def __init__(self, key: str, url: str, cause: str, todo: str):
        super().__init__(f"{key}={masked(url)}: {_scrub(cause, url)}; {todo}")


def masked(url: str) -> str:
    """The URL with any password replaced by ***."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _scrub(text: str, url: str) -> str:
    """A driver's message with the URL's password (if any) masked."""
    password = urllib.parse.urlsplit(url).password
    return text.replace(password, "***") if password else text


def is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def _request(url: str) -> urllib.request.Request:
    """A GET with MLflow's client credentials: user:password in the URL, else MLFLOW_TRACKING_TOKEN,
    else MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (urllib itself ignores URL userinfo)."""
    parts = urllib.parse.urlsplit(url)
    bare = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))
    user = parts.username or os.environ.get("MLFLOW_TRACKING_USERNAME")
    password = parts.password if parts.username else os.environ.get("MLFLOW_TRACKING_PASSWORD", "")
    token = None if parts.username else os.environ.get("MLFLOW_TRACKING_TOKEN")
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif user:
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return urllib.request.Request(bare, headers=headers)


def _get(url: str, what: str, key: str, timeout: float, uri: str) -> bytes:
    try:
        with urllib.request.urlopen(_request(url), timeout=timeout) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        detail = f"HTTP {e.code} {e.reason}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        detail = str(getattr(e, "reason", e))
    raise PreflightError(
        key,
        uri,
        f"MLflow tracking server not reachable: {what} failed: {detail}",
        f"start it (docs/scale-out.md), or point {key} / MLFLOW_TRACKING_URI elsewhere",
    )


def check_tracking_server(uri: str, timeout: float = TIMEOUT_S, key: str = TRACKING_KEY) -> None:
    base = uri.rstrip("/")
    _get(f"{base}/health", "GET /health", key, timeout, uri)
    body = _get(
        f"{base}/api/2.0/mlflow/experiments/search?max_results=1", "an API call (experiments/search)", key, timeout, uri
    )
    try:
        json.loads(body or b"{}")
    except ValueError:
        raise PreflightError(
            key,
            uri,
            f"experiments/search did not answer JSON: {body[:200]!r}",
            "is this an MLflow server? Point it at one",
        ) from None


def _connect_args(url) -> dict:
    if url.get_backend_name() in ("postgresql", "mysql", "mariadb"):
        return {"connect_timeout": int(TIMEOUT_S)}
    return {}


def _engine(url: str, key: str):
    """A SQLAlchemy engine for `url` (no connection yet); PreflightError for a URL that does
    not parse or whose driver is not installed."""

    try:
        parsed = sqlalchemy.engine.make_url(url)
        return sqlalchemy.create_engine(parsed, connect_args=_connect_args(parsed), poolclass=sqlalchemy.pool.NullPool)
    except ModuleNotFoundError as e:
        package = DRIVERS.get(e.name, e.name)
        raise PreflightError(
            key,
            url,
            f"its database driver {e.name!r} is not installed",
            f"pip install '{package}' (rlbench installs psycopg and psycopg2-binary: "
            "postgresql:// and postgresql+psycopg2:// work)",
        ) from None
    except Exception as e:  # noqa: BLE001 - a URL that does not parse, an unknown dialect: any reason is reported
        raise PreflightError(
            key,
            url,
            f"cannot use this URL: {type(e).__name__}: {e}",
            "allowed: sqlite:///path/file.db or postgresql://user:password@host:5432/db",
        ) from None


def check_database(url: str, key: str, kind: Kind = MLFLOW) -> None:
    """A database URL (key: the setting that names it): a local SQLite file that can be used,
    or a server that takes one connection."""

    if url.startswith("sqlite:"):
        _check_sqlite(url, key, kind)
        return
    engine = _engine(url, key)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except Exception as e:  # noqa: BLE001 - any driver's connect error is reported as unreachable
        detail = str(getattr(e, "orig", None) or e).strip().split("\n")[0] or repr(e)
        raise PreflightError(
            key,
            url,
            f"{kind.what} not reachable: connect failed: {detail}",
            f"start the database, check the URL, or point {key} elsewhere",
        ) from None
    finally:
        engine.dispose()
    if kind is OPTUNA:
        _optuna_schema(url, key)


def _check_sqlite(url: str, key: str, kind: Kind, reading: bool = False) -> None:
    """A SQLite file: usable (rlbench/prepare/store_files.py), then of this MLflow's or Optuna's schema."""
    if sqlite_path(url) is None:
        raise PreflightError(
            key,
            url,
            "not a SQLite file URL (sqlite:/// and a path)",
            f"give {key}=sqlite:///relative/path.db or sqlite:////absolute/path.db",
        )
    problem = sqlite_problem(url, kind, key, reading)
    if problem is not None:
        raise PreflightError(key, url, problem.cause, problem.todo)
    path = sqlite_path(url)
    if not path.exists() or path.stat().st_size == 0:
        return

    if kind is MLFLOW:
        from rlbench.tracking.store import first_open, schema_problem  # lazy: keeps mlflow off the start

        with first_open(url):  # a process creating this store's tables now is waited for, not read halfway
            found = schema_problem(path) if MLFLOW.tables <= tables(path) else None
        if found is not None:
            raise PreflightError(key, url, *found)
    if kind is OPTUNA and OPTUNA.tables <= tables(path):
        _optuna_schema(url, key)


def _optuna_schema(url: str, key: str) -> None:
    """An existing Optuna study storage of another Optuna version: its own message, as one line."""
    import optuna  # lazy: keeps optuna off the start

    try:
        optuna.storages.RDBStorage(url, skip_table_creation=True).engine.dispose()
    except RuntimeError as e:  # Optuna's refusal of a table schema of another Optuna version
        raise PreflightError(
            key,
            url,
            str(e).split(". Please")[0],
            f"upgrade it (optuna storage upgrade --storage '{masked(url)}'), or upgrade Optuna "
            "(pip install -U optuna) if a newer one wrote it",
        ) from None
    except Exception:  # noqa: BLE001 - no tables yet on a new server database: the search makes them
        return


def check(
    tracking_uri: str | None = None, storage: str | None = None, *, key: str = TRACKING_KEY, reading: bool = False
) -> None:
    """Raise PreflightError unless the tracking store and (if given) the study storage can be
    used. key: the setting that named the tracking URI (a command's --tracking-uri); reading:
    the command reads runs (a report, a prediction), so a SQLite store must exist."""
    if tracking_uri:
        if is_http(tracking_uri):
            check_tracking_server(tracking_uri, key=key)
        elif tracking_uri.startswith("sqlite:"):
            _check_sqlite(tracking_uri, key, MLFLOW, reading)
        elif "://" in tracking_uri and not tracking_uri.startswith(("file:", "databricks")):
            check_database(tracking_uri, key)
    if storage:
        check_database(storage, STORAGE_KEY, OPTUNA)


def job_store_problem(tracking) -> str | None:
    """Why a single job's stores cannot be used, or None: its tracking store (a top-level run's;
    a sweep checked its jobs' once) and its artifact location, as run_job checks them. The
    command asks before Hydra makes the run's output folder."""
    try:
        if tracking.parent_run_id is None:
            check(tracking.uri)
    except PreflightError as e:
        return str(e)
    from rlbench.tracking.store import artifact_problem  # lazy: keeps mlflow off the start

    return artifact_problem(tracking)
