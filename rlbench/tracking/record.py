"""One job's MLflow run: params, tags, metrics, artifacts, and a truthful status.

`JobRecord` is a context manager: FINISHED on a clean exit, KILLED on Ctrl-C or SIGTERM
(JobKilled), FAILED on any other exception (an `error` tag, a traceback artifact) or where an
artifact could not be written (IncompleteRecord). docs/metrics.md, "Status" and "Tags".
"""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import logging
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Self

import mlflow
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from omegaconf import OmegaConf

from rlbench.config.schema import Config, PackingConfig, SweepOptions
from rlbench.core.disk import full_disk
from rlbench.core.env_families import without_added_fields
from rlbench.core.signals import note_record
from rlbench.tracking.fingerprint import host_tags
from rlbench.tracking.orphans import owner_tags
from rlbench.tracking.store import open_experiment, run_name_from, unique_top_level_name
from rlbench.tracking.unmeasured import TAG as UNMEASURED
from rlbench.tracking.unmeasured import format_unmeasured

log = logging.getLogger(__name__)

_PARAM_BATCH = 100  # MLflow's per-call limits
_METRIC_BATCH = 1000
SIGNIFICANT_DIGITS = 6
_TAG_LIMIT = 8000  # MLflow's tag value limit
_SHOWN_ELSEWHERE = ("parent_run_id", "run_name", "tags", "experiment")  # the run's parent, name, tags, experiment


def flatten(cfg: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = "null" if v is None else str(v)
    return out


def param_names(conf) -> set[str]:
    """The params a job logs for its validated config (params_and_tags; the tracking section is a tag)."""

    return set(flatten(dataclasses.asdict(conf)))


def rounded(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """A metric as logged: integers exact, other values to `digits` significant digits
    (2193.21, not 2193.213004631286: the UI and summary.csv show what was logged)."""
    value = float(value)
    if not math.isfinite(value) or value.is_integer():
        return value
    return float(f"{value:.{digits}g}")


# Keys added after records existed, at the value those records ran: left out of a job's params and
# config.yaml there, so that a job alone (pack=1, no sweep options) records as it did before them.
ADDED = {"sweep": dataclasses.asdict(SweepOptions()), "pack": 1, "packing": dataclasses.asdict(PackingConfig())}


def as_recorded(config: dict) -> dict:
    """A job's config (dataclasses.asdict) as its record holds it: ADDED's keys and an env family's
    ADDED_FIELDS left out where they hold their earlier value (as config_hash leaves them out)."""
    out = {k: v for k, v in config.items() if k not in ADDED or ADDED[k] != v}
    if isinstance(out.get("env"), dict):
        out["env"] = without_added_fields(out["env"])
    return out


def _plain(value):
    """A frozen config's mappings and sequences (config/frozen.py) as the dicts and lists YAML writes."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def params_and_tags(resolved: dict, overrides: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Params: the job's validated config as a dict (dataclasses.asdict), which differs between jobs only where the work
    differs. Tags: the tracking plumbing (where and how it was recorded) and the overrides,
    which the compare view would otherwise show as differences."""
    sweeps = ("hydra", "tracking", "repeats", "dry_run", "verdict", "sweep", "packing")  # the sweep's
    params = flatten({k: v for k, v in as_recorded(resolved).items() if k not in sweeps})
    tracking = {
        k: v
        for k, v in (resolved.get("tracking") or {}).items()
        if k not in _SHOWN_ELSEWHERE and v not in (None, {}, [])
    }
    tags = flatten(tracking, "tracking.")
    tags["overrides"] = " ".join(overrides) or "(none)"
    return params, tags


def created_meanwhile(error: Exception) -> bool:
    """A store's refusal of a row another writer inserted first: its unique key taken
    (PostgreSQL's UniqueViolation "duplicate key", SQLite's "UNIQUE constraint failed")."""
    text = str(error).lower()
    return "duplicate key" in text or "unique constraint" in text


def log_input(dataset, tries: int = 3) -> None:
    """The job's env as its MLflow input. Two writers logging the same new dataset at once (a
    search's workers against one server) can both find it missing and both insert it: the
    loser's insert breaks the store's unique key, and its retry finds the winner's row."""
    for attempt in range(tries):
        try:
            mlflow.log_input(dataset, context="environment")
            return
        except MlflowException as e:
            if attempt == tries - 1 or not created_meanwhile(e):
                raise
            time.sleep(0.2 * (attempt + 1))


def source_tags(command: str) -> dict[str, str]:
    """MLflow's user and source tags (a run made with MlflowClient.create_run gets none)."""
    return {
        "mlflow.user": getpass.getuser(),
        "mlflow.source.type": "LOCAL",
        "mlflow.source.name": f"rlbench {command}",  # the UI shows a source's last path part: no paths here
        "rlbench.command": " ".join(["python -m rlbench", *sys.argv[1:]])[:5000],
    }


class JobRecord:
    def __init__(
        self,
        config: Config,
        overrides: list[str],
        output_dir: Path | None,
        extra_tags: dict | None = None,
        dataset=None,
    ):
        """config: the job's one validated config (its params, its config.yaml, its tracking
        settings); dataset: what the run consumed (an mlflow.data Dataset: the environment), logged as its input."""
        self.config, self.tracking, self.overrides = config, config.tracking, overrides
        self.output_dir, self.extra_tags, self.dataset = output_dir, extra_tags or {}, dataset
        self.unmeasured: dict[str, str] = {}
        self._lost: dict[str, str] = {}  # artifact -> why it could not be written
        self._full_disk: list[str] = []  # what of it a full disk refused
        self._full_disk_error: BaseException | None = None  # the first of those errors
        self.run = None
        self._client = None
        self.opened_at: float | None = None

    def __enter__(self) -> Self:
        experiment_id = open_experiment(self.tracking)
        name = self.tracking.run_name or run_name_from(self.overrides)
        if self.tracking.parent_run_id is None and not self.tracking.run_name:
            name = unique_top_level_name(experiment_id, name)
        hijack = os.environ.pop("MLFLOW_RUN_ID", None)  # would make start_run resume that run
        if hijack:
            log.warning("ignoring MLFLOW_RUN_ID=%s: every rlbench job opens its own run", hijack)
        while mlflow.active_run() is not None:  # a clean MLflow state for each job of a worker
            mlflow.end_run()
        mlflow.set_system_metrics_sampling_interval(max(self.tracking.log_every_s, 1.0))
        # one call makes and starts the run: a SIGTERM inside a store call is raised where that call
        # returns (core/signals.py), so a run made by one call and started by another could be left
        # RUNNING and unnamed on the last line. start_run's notebook probe imports IPython (0.2 s).
        self.run = mlflow.start_run(
            experiment_id=experiment_id,
            run_name=name,
            log_system_metrics=self.tracking.system_metrics,
            parent_run_id=self.tracking.parent_run_id,
            tags={
                **{k: v for k, v in source_tags("job").items() if k.startswith("mlflow.")},
                **owner_tags(),
            },  # owner: tells a killed job's run (orphans.py)
        )
        self.opened_at = time.perf_counter()  # the job's job_start_s counts from here
        try:  # the run exists from here: a stop or error before `with` takes over still ends it (__exit__)
            self._write_start()
        except BaseException as e:
            if not self.__exit__(type(e), e, e.__traceback__):
                raise
        return self

    def _write_start(self) -> None:
        self._last_beat = 0.0
        self.heartbeat()
        self._client = mlflow.MlflowClient()
        params, tags = params_and_tags(dataclasses.asdict(self.config), self.overrides)
        items = list(params.items())
        for i in range(0, len(items), _PARAM_BATCH):
            mlflow.log_params(dict(items[i : i + _PARAM_BATCH]))
        mlflow.set_tags({**host_tags(), **tags, **self.extra_tags, **self.tracking.tags})
        if self.dataset is not None:
            log_input(self.dataset)

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    def log_metrics(self, metrics: dict, step: int) -> None:
        finite = {k: rounded(v) for k, v in metrics.items() if v is not None and not math.isnan(v)}
        if finite:
            mlflow.log_metrics(finite, step=step)
        self.heartbeat()

    def heartbeat(self, every_s: float = 10.0) -> None:
        """Tag `heartbeat` (unix seconds) at most every `every_s`; see mark_stale_runs."""
        now = time.time()
        if now - self._last_beat >= every_s:
            mlflow.set_tag("heartbeat", f"{now:.0f}")
            self._last_beat = now

    def log_series(self, key: str, values: list[tuple[float, int]]) -> None:
        """Many values of one metric at once (e.g. episode returns with their frame step)."""
        now = int(time.time() * 1000)
        for i in range(0, len(values), _METRIC_BATCH):
            batch = [Metric(key, rounded(v), now, s) for v, s in values[i : i + _METRIC_BATCH]]
            self._client.log_batch(self.run_id, metrics=batch)

    def set_tags(self, tags: dict) -> None:
        """Tags; a `null/<metric>` entry (a value the job could not measure, with the reason)
        goes into the one `unmeasured` tag instead (rlbench/tracking/unmeasured.py)."""
        missing = {k.removeprefix("null/"): v for k, v in tags.items() if k.startswith("null/")}
        mlflow.set_tags({k: v for k, v in tags.items() if not k.startswith("null/")})
        if missing:
            self.set_unmeasured(missing)

    def set_unmeasured(self, reasons: dict[str, str]) -> None:
        self.unmeasured |= reasons
        mlflow.set_tag(UNMEASURED, format_unmeasured(self.unmeasured)[:_TAG_LIMIT])

    def log_table(self, columns: dict[str, list], name: str) -> None:
        """A table artifact the UI shows as one (MLflow's log_table)."""
        mlflow.log_table(columns, name)

    def log_artifacts(self, paths: list[Path], folder: str | None = None) -> None:
        for path in paths:
            mlflow.log_artifact(str(path), folder)

    def lost(self, what: str, error: BaseException) -> None:
        """Note an artifact that could not be written: the run cannot end FINISHED (__exit__). On
        a full disk the first is logged, the others named in one line before the run's end."""
        self._lost[what] = f"{type(error).__name__}: {brief(error)}"[:300]
        if full_disk(error) is not None:
            self._full_disk.append(what)
            self._full_disk_error = self._full_disk_error or error
            if len(self._full_disk) > 1:
                return
        log.warning("could not log %s: %s", what, brief(error))

    def __exit__(self, exc_type, exc, tb) -> bool:
        status = "FINISHED" if exc_type is None else "KILLED" if issubclass(exc_type, KeyboardInterrupt) else "FAILED"
        if exc is not None:
            with contextlib.suppress(AttributeError):  # the run id lets a sweep's summary name the failed run
                exc.run_id = self.run_id
        self._write_end(status, exc_type, exc, tb)  # a write that fails is noted in _lost, never raised
        incomplete = bool(self._lost) and status == "FINISHED"
        if incomplete:
            status = "FAILED"
            error = str(IncompleteRecord(self.run_id, self._lost))[:5000]
            self._write("the error tag", lambda: mlflow.set_tag("error", error))
        if len(self._full_disk) > 1:
            log.warning("the disk is full: could not log %s either", ", ".join(self._full_disk[1:]))
        ended = self._end(status)
        reads = status if ended is None else "RUNNING"  # what the store reads: the command's last line says it
        if exc is not None:
            with contextlib.suppress(AttributeError):
                exc.run_status = reads
        if status == "KILLED":
            note_record(exc, "job run", self.run_id, reads)
        if exc_type is None and (incomplete or ended is not None):
            lost = self._lost | ({"its end": ended} if ended is not None else {})
            raise IncompleteRecord(self.run_id, lost, status=reads) from self._full_disk_error
        return False

    def _write_end(self, status: str, exc_type, exc, tb) -> None:
        if status == "KILLED":
            reason = "killed: " + (type(exc).__name__ if exc else "interrupt")
            self._write("the end_reason tag", lambda: mlflow.set_tag("end_reason", reason))
        elif status == "FAILED":
            self._write("the error tag", lambda: mlflow.set_tag("error", f"{exc_type.__name__}: {exc}"[:5000]))
            self._log_text("".join(traceback.format_exception(exc_type, exc, tb)), "traceback.txt")
        self._log_artifacts()

    def _write(self, what: str, write) -> None:
        try:
            write()
        except Exception as e:  # noqa: BLE001 - never mask the job's own outcome
            self.lost(what, e)

    def _end(self, status: str) -> str | None:
        """End the run `status`; None, or why the store took no end. MLflow takes the run off its
        active runs before writing, so its exit hook never ends it FINISHED: left RUNNING, the
        next rlbench start closes it KILLED (tracking/orphans.py)."""
        try:
            mlflow.end_run(status=status)
        except Exception as e:  # noqa: BLE001 - e.g. the store's disk is full
            log.error(
                "could not end MLflow run %s %s: %s; it reads RUNNING until the next rlbench start closes it KILLED",
                self.run_id,
                status,
                brief(e),
            )
            return f"{type(e).__name__}: {brief(e)}"[:300]
        log.info("MLflow run %s ended %s", self.run_id, status)
        return None

    def _log_text(self, text: str, name: str) -> None:
        self._write(name, lambda: mlflow.log_text(text, name))

    def _log_artifacts(self) -> None:
        self._log_text(OmegaConf.to_yaml(_plain(as_recorded(dataclasses.asdict(self.config)))), "config.yaml")
        if self.output_dir is None:
            return
        try:
            hydra_dir = self.output_dir / ".hydra"
            if hydra_dir.is_dir():
                mlflow.log_artifacts(str(hydra_dir), ".hydra")
            for logfile in self.output_dir.glob("*.log"):
                mlflow.log_artifact(str(logfile))
        except Exception as e:  # noqa: BLE001 - never mask the job's own outcome
            self.lost(".hydra/ and the job log", e)


def brief(error: BaseException) -> str:
    """An error's message in one line, without the SQL and parameters SQLAlchemy's text carries
    (its first line, less SQLAlchemy's autoflush note and its `(sqlite3.OperationalError) ` prefix)."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip() and not ln.startswith("(raised as a result of")]
    return re.sub(r"^\([\w.]+\) ", "", lines[0]) if lines else type(error).__name__


class IncompleteRecord(RuntimeError):
    """A job that ran to its end but whose record misses artifacts (its run ends FAILED, naming
    them) or whose end the store did not take (its run reads RUNNING: `status`)."""

    def __init__(self, run_id: str, lost: dict[str, str], status: str = "FAILED"):
        ended = "ended FAILED" if status == "FAILED" else f"reads {status}"
        super().__init__(
            f"run {run_id} {ended}: its record is incomplete: could not write "
            + "; ".join(f"{what} ({why})" for what, why in lost.items())
        )
        self.run_id, self.lost, self.run_status = run_id, dict(lost), status  # run_status: the one line says it
