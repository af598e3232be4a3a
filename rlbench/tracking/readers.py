"""What rlbench reads back from the tracking store, as plain data: runs, a sweep, an experiment.

`read_run`, `read_sweep`, `sweep_parent`, `experiment_runs`, `study_parent` and `logged_table`
give `RunRecord`s and tables; MLflow's errors stop here, as `NoSuchRun` and `NoSuchExperiment`
(LookupErrors naming the store), so callers and their tests need no mlflow. docs/metrics.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import mlflow
from mlflow.exceptions import MlflowException


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    name: str
    experiment_id: str
    status: str  # FINISHED, FAILED, KILLED, RUNNING
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    wall_s: float | None = None  # end_time less start_time (None while it runs)


@dataclass(frozen=True)
class SweepRecord:
    parent: RunRecord
    children: list[RunRecord]
    summary: list[dict]  # the parent's summary.json rows ([] before the sweep ended)


class NoSuchRun(LookupError):
    """A run the store could not give: `uri` is the store's address, `detail` its reason."""

    def __init__(self, run_id: str, uri: str, detail: str):
        super().__init__(detail)
        self.run_id, self.uri, self.detail = run_id, uri, detail


class NoSuchExperiment(LookupError):
    """An experiment name the store does not know."""

    def __init__(self, name: str, uri: str):
        super().__init__(f"no experiment {name!r} at {uri}")
        self.name, self.uri = name, uri


def _record(run) -> RunRecord:
    """An MLflow Run as plain data."""
    return RunRecord(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        experiment_id=run.info.experiment_id,
        status=run.info.status,
        params=dict(run.data.params),
        metrics=dict(run.data.metrics),
        tags=dict(run.data.tags),
        wall_s=_wall_s(run.info),
    )


def _wall_s(info) -> float | None:
    ends, starts = getattr(info, "end_time", None), getattr(info, "start_time", None)
    return (ends - starts) / 1000.0 if ends and starts else None


def read_run(run_id: str) -> RunRecord:
    try:
        return _record(mlflow.MlflowClient().get_run(run_id))
    except MlflowException as e:
        raise NoSuchRun(run_id, mlflow.get_tracking_uri(), e.message) from None


def read_sweep(parent_id: str) -> SweepRecord:
    """A sweep's or a search's parent run, its children (the jobs or trials) and its summary."""
    parent = read_run(parent_id)
    try:
        children = mlflow.search_runs(
            [parent.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'", output_format="list"
        )
    except MlflowException as e:
        raise NoSuchRun(parent_id, mlflow.get_tracking_uri(), e.message) from None
    try:
        summary = logged_table(parent_id, "summary.json")
    except Exception:  # noqa: BLE001 - a killed sweep may have no summary yet, or no readable artifacts
        summary = []
    return SweepRecord(parent, [_record(r) for r in children] + _linked(summary, children), summary)


def _linked(summary: list[dict], children) -> list[RunRecord]:
    """The runs the summary names that are not children: the earlier FINISHED runs a resumed
    sweep did not rerun (rlbench/sweeps/sweep.py), which belong to the sweep all the same."""
    ids = {r.info.run_id for r in children}
    out = []
    for row in summary:
        if row.get("run_id") and row["run_id"] not in ids:
            try:
                out.append(read_run(row["run_id"]))
            except NoSuchRun:  # deleted since: the report lists the row as missing
                continue
    return out


def logged_table(run_id: str, path: str) -> list[dict]:
    """A table the run logged with mlflow.log_table (JSON: columns and data) as rows; [] if absent."""
    client = mlflow.MlflowClient()
    folder = path.rpartition("/")[0] or None
    if path not in {a.path for a in client.list_artifacts(run_id, folder)}:
        return []
    with open(client.download_artifacts(run_id, path)) as f:
        table = json.load(f)
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]


def experiment_id(name: str) -> str | None:
    exp = mlflow.get_experiment_by_name(name)
    return None if exp is None else exp.experiment_id


def experiment_runs(name: str, status: str | None = None) -> list[RunRecord]:
    """Every run of the experiment `name` (with `status`: those in that state); NoSuchExperiment
    when there is none."""
    found = experiment_id(name)
    if found is None:
        raise NoSuchExperiment(name, mlflow.get_tracking_uri())
    where = f"attributes.status = '{status}'" if status else ""
    return [_record(r) for r in mlflow.search_runs([found], filter_string=where, output_format="list")]


def sweep_parent(key: str, experiment_id: str) -> RunRecord | None:
    """The newest ended parent run of the sweep whose `sweep_key` tag is `key`, or None (a
    RUNNING one belongs to a sweep still running)."""
    where = f"tags.`rlbench.role` = 'sweep' and tags.sweep_key = '{key}' and attributes.status != 'RUNNING'"
    found = mlflow.search_runs(
        [experiment_id],
        filter_string=where,
        output_format="list",
        max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    return _record(found[0]) if found else None


def trial_numbers(run_ids: list[str], study: str) -> set[int]:
    """The Optuna trial numbers of those runs that are trials of `study` (their tags)."""
    return study_trials([read_run(run_id).tags for run_id in run_ids], study)


def study_trials(tags: list[dict[str, str]], study: str) -> set[int]:
    """The trial numbers in runs' `tags` that are trials of `study`: another study's trial of the
    same number is not one of them."""
    return {
        int(t["optuna_trial"]) for t in tags if t.get("optuna_study") == study and t.get("optuna_trial", "").isdigit()
    }


def study_tags(study: str) -> dict[str, str]:
    """The tags of the parent run of a search over the Optuna study `study` (rlbench/searches/)."""
    return {"rlbench.role": "study", "optuna_study": study}


def study_parent(study: str, experiment_id: str | None = None) -> RunRecord | None:
    """The parent run of the search over the Optuna study `study` (its `study_tags`), in one
    experiment or (None) in all of them; None when there is none."""
    where = " and ".join(f"tags.`{k}` = '{v}'" for k, v in study_tags(study).items())
    scope = {"experiment_ids": [experiment_id]} if experiment_id else {"search_all_experiments": True}
    found = mlflow.search_runs(**scope, filter_string=where, output_format="list", max_results=1)
    return _record(found[0]) if found else None
