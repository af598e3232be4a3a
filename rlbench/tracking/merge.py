"""One MLflow store's runs copied into another (a GPU host's study into a local store, to compare
it with CPU runs in one UI): every experiment by name, every run with its params, tags, metric
histories, inputs, status, times and artifacts, sweep children re-linked to their copied
parents; a run copied before is skipped (tag rlbench.merged_from). docs/gpu.md.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mlflow
from mlflow.entities import Metric, Param, ViewType

from rlbench.config.schema import TrackingConfig
from rlbench.tracking.artifacts import SCHEME, store_root
from rlbench.tracking.store import open_experiment

MERGED = "rlbench.merged_from"  # on a copy: the source run's id
PARENT = "mlflow.parentRunId"
_BATCH = 1000  # MLflow's limit of metrics per log_batch (params and tags: 100)


@dataclass
class Merged:
    experiments: int = 0
    copied: int = 0
    skipped: int = 0  # already in the destination (an earlier merge)


def artifact_folder(artifact_uri: str, src_uri: str) -> Path | None:
    """The local folder of a run's artifacts in the source store (rlbench-store: or file:), or None."""
    parsed = urllib.parse.urlparse(artifact_uri)
    if parsed.scheme == SCHEME:
        root = store_root(src_uri)
        return root / parsed.path.lstrip("/") if root is not None else None
    if parsed.scheme in ("", "file"):
        return Path(urllib.parse.unquote(parsed.path))
    return None


def merge_store(src_uri: str, dst_uri: str, say: Callable[[str], None] = print) -> Merged:
    """Copy every run of `src_uri` into `dst_uri` (runs copied before are skipped)."""
    src, done = mlflow.MlflowClient(src_uri), Merged()
    for exp in src.search_experiments(view_type=ViewType.ACTIVE_ONLY):
        runs = _all_runs(src, exp.experiment_id)
        if not runs:
            continue
        dst_exp = open_experiment(TrackingConfig(uri=dst_uri, experiment=exp.name))
        dst = mlflow.MlflowClient(dst_uri)
        ids = _copied(dst, dst_exp)
        done.experiments += 1
        for run in sorted(runs, key=lambda r: (PARENT in r.data.tags, r.info.start_time or 0)):
            if run.info.run_id in ids:
                done.skipped += 1
                continue
            ids[run.info.run_id] = _copy_run(src, dst, dst_exp, run, ids, src_uri)
            done.copied += 1
        say(f"experiment {exp.name}: {len(runs)} runs, {done.copied} copied so far, {done.skipped} already there")
    return done


def _all_runs(client, experiment_id: str) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id], run_view_type=ViewType.ACTIVE_ONLY, max_results=1000, page_token=token
        )
        runs += list(page)
        token = page.token
        if not token:
            return runs


def _copied(dst, experiment_id: str) -> dict[str, str]:
    """source run id -> its copy's id, for the runs merged into this experiment before."""
    return {r.data.tags[MERGED]: r.info.run_id for r in _all_runs(dst, experiment_id) if MERGED in r.data.tags}


def _copy_run(src, dst, experiment_id: str, run, ids: dict[str, str], src_uri: str) -> str:
    tags = dict(run.data.tags) | {MERGED: run.info.run_id}
    if PARENT in tags:
        tags[PARENT] = ids.get(tags[PARENT], tags[PARENT])
    new = dst.create_run(experiment_id, start_time=run.info.start_time, tags=tags, run_name=run.info.run_name)
    new_id = new.info.run_id
    params = [Param(k, v) for k, v in run.data.params.items()]
    for i in range(0, len(params), 100):
        dst.log_batch(new_id, params=params[i : i + 100])
    metrics = [
        Metric(m.key, m.value, m.timestamp, m.step)
        for key in run.data.metrics
        for m in src.get_metric_history(run.info.run_id, key)
    ]
    for i in range(0, len(metrics), _BATCH):
        dst.log_batch(new_id, metrics=metrics[i : i + _BATCH])
    if run.inputs and run.inputs.dataset_inputs:
        dst.log_inputs(new_id, datasets=list(run.inputs.dataset_inputs))
    folder = artifact_folder(run.info.artifact_uri, src_uri)
    if folder is not None and folder.is_dir() and any(folder.iterdir()):
        dst.log_artifacts(new_id, str(folder))
    dst.set_terminated(new_id, run.info.status, run.info.end_time)
    return new_id
