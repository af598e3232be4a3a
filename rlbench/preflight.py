"""Preflight: are the tracking server and the study storage reachable? Checked before any job.

A sweep on a cluster or N search workers should not start training (nor queue SLURM jobs)
only to find that MLflow or the Optuna database cannot be reached: the jobs' results would
be lost, and MLflow's client retries for minutes before it gives up. So sweeps, searches
and single runs call `check(...)` first; a failure raises PreflightError naming the URL
(password masked) and what failed, which the entry points turn into exit code 2.

- http(s) tracking URI: GET <uri>/health (the MLflow server's liveness endpoint), then one
  API call (search experiments) so that a server whose backend store is down fails too.
- a database URL (tracking URI or study storage): open one SQLAlchemy connection with a
  short connect timeout.
- sqlite: its folder is created (as the stores themselves do); nothing to reach.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from rlbench.config.validate import ConfigError

TIMEOUT_S = 5.0


class PreflightError(ConfigError):
    """A tracking server or study storage that cannot be reached; raised before any job."""


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


def _get(url: str, what: str, shown: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(_request(url), timeout=timeout) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        detail = f"HTTP {e.code} {e.reason}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        detail = _scrub(str(getattr(e, "reason", e)), url)
    raise PreflightError(f"MLflow tracking server {shown} not reachable: {what} failed: {detail}. "
                         "Start it (docs/scale-out.md) or point tracking.uri / MLFLOW_TRACKING_URI elsewhere; "
                         "no job started")


def check_tracking_server(uri: str, timeout: float = TIMEOUT_S) -> None:
    base, shown = uri.rstrip("/"), masked(uri)
    _get(f"{base}/health", "GET /health", shown, timeout)
    body = _get(f"{base}/api/2.0/mlflow/experiments/search?max_results=1", "an API call (experiments/search)",
                shown, timeout)
    try:
        json.loads(body or b"{}")
    except ValueError:
        raise PreflightError(f"MLflow tracking server {shown}: experiments/search did not answer JSON "
                             f"(is this an MLflow server?): {body[:200]!r}; no job started") from None


def _connect_args(url) -> dict:
    if url.get_backend_name() in ("postgresql", "mysql", "mariadb"):
        return {"connect_timeout": int(TIMEOUT_S)}
    return {}


def check_database(url: str, role: str) -> None:
    """One connection to a SQLAlchemy URL (role: what the database is for, for the message)."""
    import sqlalchemy

    if url.startswith("sqlite:///"):  # a file on this host: its folder is all it needs
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return
    shown = masked(url)
    try:
        parsed = sqlalchemy.engine.make_url(url)
        engine = sqlalchemy.create_engine(parsed, connect_args=_connect_args(parsed), poolclass=sqlalchemy.pool.NullPool)
    except Exception as e:  # noqa: BLE001 - bad URL, missing driver: any reason is reported
        raise PreflightError(f"{role} {shown}: cannot use this URL: {type(e).__name__}: {_scrub(str(e), url)}; "
                             "no job started") from None
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except Exception as e:  # noqa: BLE001 - any driver's connect error is reported as unreachable
        detail = _scrub(str(getattr(e, "orig", None) or e).strip().split("\n")[0] or repr(e), url)
        raise PreflightError(f"{role} {shown} not reachable: connect failed: {detail}; no job started") from None
    finally:
        engine.dispose()


def check(tracking_uri: str | None = None, storage: str | None = None) -> None:
    """Raise PreflightError unless the tracking store and (if given) the study storage answer."""
    if tracking_uri:
        if is_http(tracking_uri):
            check_tracking_server(tracking_uri)
        elif "://" in tracking_uri and not tracking_uri.startswith(("file:", "databricks")):
            check_database(tracking_uri, "MLflow tracking store")
    if storage:
        check_database(storage, "Optuna study storage search.storage")


def preflight_or_exit(tracking_uri: str, storage: str | None = None) -> None:
    """Tracking server (and study storage) reachable, or exit 2 before any job or run exists:
    what a sweep and a search do first."""
    try:
        check(tracking_uri, storage)
    except PreflightError as e:
        print(f"rlbench: {e}", file=sys.stderr)
        sys.exit(2)
