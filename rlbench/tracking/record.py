"""One job's MLflow run: params, tags, metrics, artifacts, and a truthful status.

`JobRecord` is a context manager. On a clean exit the run ends FINISHED; on Ctrl-C or
SIGTERM (JobKilled) it ends KILLED; on any other exception FAILED with the error text as a
tag and the traceback as an artifact. Artifacts (resolved config, .hydra/, job log) are
logged whatever the outcome.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import traceback
from pathlib import Path

import mlflow
from mlflow.entities import Metric
from omegaconf import DictConfig, OmegaConf

from rlbench.config.schema import TrackingConfig
from rlbench.tracking.fingerprint import host_tags

log = logging.getLogger(__name__)

_PARAM_BATCH = 100  # MLflow's per-call limit


class JobKilled(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler."""


class JobPruned(KeyboardInterrupt):
    """Raised by a search's pruner from a job's tick: the job stops early and ends KILLED."""


def flatten(cfg: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = "null" if v is None else str(v)
    return out


def run_name_from(overrides: list[str]) -> str:
    """A run's name: its overrides, less where results go and how progress shows."""
    skip = ("hydra", "tracking.", "progress=")
    task = [o for o in overrides if not o.lstrip("+~").startswith(skip)]
    return " ".join(task) if task else "defaults"


def open_experiment(tracking: TrackingConfig) -> str:
    """Point MLflow at the configured store and return the experiment id (created if new)."""
    if tracking.uri.startswith("sqlite:///") and not tracking.uri.startswith("sqlite:////"):
        Path(tracking.uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(tracking.uri)
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


def artifact_location(tracking: TrackingConfig) -> str | None:
    """Where a new experiment keeps artifacts. With a tracking server a local path would exist
    only on this host: None lets the server proxy them (`mlflow server --artifacts-destination`)."""
    location = tracking.artifact_location
    if not location or "://" in location:
        return location or None
    if tracking.uri.startswith(("http://", "https://")):
        return None
    return Path(location).resolve().as_uri()


def config_hash(conf) -> str:
    """Identity of a job's work: the typed config without tracking, progress and resume."""
    from dataclasses import asdict

    d = asdict(conf)
    for key in ("tracking", "progress", "resume"):
        d.pop(key, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def mark_stale_runs(tracking: TrackingConfig) -> list[str]:
    """Runs left RUNNING by a killed process (no heartbeat for stale_after_s) become FAILED."""
    exp = mlflow.get_experiment_by_name(tracking.experiment)
    if exp is None:
        return []
    client, now, stale = mlflow.MlflowClient(), time.time(), []
    for run in mlflow.search_runs([exp.experiment_id], filter_string="attributes.status = 'RUNNING'",
                                  output_format="list"):
        if run.data.tags.get("rlbench.role") == "sweep":
            last = run.info.start_time / 1000  # a parent has no heartbeat: judge by its children
            children = mlflow.search_runs([exp.experiment_id], output_format="list",
                                          filter_string=f"tags.mlflow.parentRunId = '{run.info.run_id}'")
            last = max([last] + [float(c.data.tags.get("heartbeat", 0)) for c in children])
        else:
            last = float(run.data.tags.get("heartbeat", run.info.start_time / 1000))
        if now - last > tracking.stale_after_s:
            client.set_tag(run.info.run_id, "end_reason",
                           f"stale: no heartbeat for {now - last:.0f} s (process killed?); marked FAILED")
            client.set_terminated(run.info.run_id, "FAILED")
            stale.append(run.info.run_id)
    if stale:
        log.warning("marked %d stale RUNNING run(s) FAILED: %s", len(stale), ", ".join(stale))
    return stale


class JobRecord:
    def __init__(self, cfg: DictConfig, tracking: TrackingConfig, overrides: list[str],
                 output_dir: Path | None, extra_tags: dict | None = None, extra_params: dict | None = None):
        self.cfg, self.tracking, self.overrides = cfg, tracking, overrides
        self.output_dir, self.extra_tags = output_dir, extra_tags or {}
        self.extra_params = extra_params or {}
        self.run = None
        self._client = None

    def __enter__(self) -> "JobRecord":
        experiment_id = open_experiment(self.tracking)
        name = self.tracking.run_name or run_name_from(self.overrides)
        hijack = os.environ.pop("MLFLOW_RUN_ID", None)  # would make start_run resume that run
        if hijack:
            log.warning("ignoring MLFLOW_RUN_ID=%s: every rlbench job opens its own run", hijack)
        while mlflow.active_run() is not None:  # a clean MLflow state for each job of a worker
            mlflow.end_run()
        mlflow.set_system_metrics_sampling_interval(max(self.tracking.log_every_s, 1.0))
        self.run = mlflow.start_run(
            experiment_id=experiment_id, run_name=name, log_system_metrics=self.tracking.system_metrics,
            parent_run_id=self.tracking.parent_run_id,
        )
        self._last_beat = 0.0
        self.heartbeat()
        self._client = mlflow.MlflowClient()
        resolved = OmegaConf.to_container(self.cfg, resolve=True)
        params = flatten({k: v for k, v in resolved.items() if k != "hydra"})
        params["overrides"] = " ".join(self.overrides) or "(none)"
        params |= {k: str(v) for k, v in self.extra_params.items()}
        items = list(params.items())
        for i in range(0, len(items), _PARAM_BATCH):
            mlflow.log_params(dict(items[i : i + _PARAM_BATCH]))
        mlflow.set_tags({**host_tags(), **self.extra_tags, **self.tracking.tags})
        return self

    @property
    def run_id(self) -> str:
        return self.run.info.run_id

    def log_metrics(self, metrics: dict, step: int) -> None:
        finite = {k: float(v) for k, v in metrics.items() if v is not None and v == v}
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
        if values:
            now = int(time.time() * 1000)
            self._client.log_batch(self.run_id, metrics=[Metric(key, v, now, s) for v, s in values])

    def set_tags(self, tags: dict) -> None:
        mlflow.set_tags(tags)

    def log_artifacts(self, paths: list[Path], folder: str | None = None) -> None:
        for path in paths:
            mlflow.log_artifact(str(path), folder)

    def __exit__(self, exc_type, exc, tb) -> bool:
        status = "FINISHED"
        if exc is not None:
            try:
                exc.run_id = self.run_id  # lets a sweep's summary name the failed run
            except AttributeError:
                pass
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            status = "KILLED"
            mlflow.set_tag("end_reason", "killed: " + (type(exc).__name__ if exc else "interrupt"))
        elif exc_type is not None:
            status = "FAILED"
            mlflow.set_tag("error", f"{exc_type.__name__}: {exc}"[:5000])
            self._log_text("".join(traceback.format_exception(exc_type, exc, tb)), "traceback.txt")
        self._log_artifacts()
        mlflow.end_run(status=status)
        log.info("MLflow run %s ended %s", self.run_id, status)
        return False

    def _log_text(self, text: str, name: str) -> None:
        try:
            mlflow.log_text(text, name)
        except Exception as e:  # never mask the job's own outcome
            log.warning("could not log %s: %s", name, e)

    def _log_artifacts(self) -> None:
        self._log_text(OmegaConf.to_yaml(self.cfg, resolve=True), "config.yaml")
        if self.output_dir is None:
            return
        try:
            hydra_dir = self.output_dir / ".hydra"
            if hydra_dir.is_dir():
                mlflow.log_artifacts(str(hydra_dir), ".hydra")
            for logfile in self.output_dir.glob("*.log"):
                mlflow.log_artifact(str(logfile))
        except Exception as e:
            log.warning("could not log job artifacts: %s", e)
