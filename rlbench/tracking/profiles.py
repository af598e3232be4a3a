"""Profile runs (`python -m rlbench.profile`): written, found and read back as plain data.

`write_profile` (tagged `profile_complete=true` last, so a profile killed while logging is
never taken for a whole one), `profile_runs` (the complete FINISHED matches, newest first),
`read_profile` and `incomplete(run)`. docs/metrics.md, "Profile runs and predictions".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlflow

from rlbench.config.schema import TrackingConfig
from rlbench.core.signals import note_record
from rlbench.tracking.fingerprint import host_tags
from rlbench.tracking.orphans import owner_tags
from rlbench.tracking.parent import source_tags
from rlbench.tracking.readers import RunRecord, logged_table, read_run
from rlbench.tracking.store import mark_stale_runs, open_experiment

ROLE = "profile"
EXPERIMENT = "rlbench-profiles"  # where profiles are logged and looked for unless told otherwise
TABLES = ("env", "inference", "update", "corun", "power", "rpc")  # <name>.json, as the model reads them
COMPLETE = "profile_complete"  # "false" while it is being logged, "true" once all of it is


@dataclass(frozen=True)
class ProfileRecord:
    run: RunRecord
    tables: dict[str, list[dict]]  # name (without .json) -> rows; [] for a table the run has not


def write_profile(
    tracking: TrackingConfig,
    name: str,
    tags: dict[str, str],
    params: dict,
    tables: dict[str, list[dict]],
    metrics: dict[str, float],
    files: list[Path],
) -> str:
    """A FINISHED profile run in the experiment `tracking` names; returns its id. `tables`: name
    -> rows (logged as <name>.json; empty ones left out). Its COMPLETE tag is set last."""
    experiment_id = open_experiment(tracking)
    mark_stale_runs(tracking)  # a start in the store: close what killed processes left RUNNING first
    run = mlflow.start_run(
        experiment_id=experiment_id,
        run_name=name,
        tags={**host_tags(), **source_tags(ROLE), **owner_tags(), "rlbench.role": ROLE, **tags, COMPLETE: "false"},
    )
    try:
        _log_profile(params, tables, metrics, files)
    except BaseException as e:  # Ctrl-C, SIGTERM: KILLED; anything else FAILED; the error goes on
        status = "KILLED" if isinstance(e, KeyboardInterrupt) else "FAILED"
        mlflow.set_tag("end_reason" if status == "KILLED" else "error", f"{type(e).__name__}: {e}"[:5000])
        mlflow.end_run(status)
        note_record(e, "profile run", run.info.run_id, status)
        raise
    mlflow.end_run("FINISHED")
    return run.info.run_id


def _log_profile(params: dict, tables: dict[str, list[dict]], metrics: dict[str, float], files: list[Path]) -> None:
    """Everything a profile run holds, then its COMPLETE tag, last."""
    mlflow.log_params(params)
    for table, rows in tables.items():
        if rows:
            mlflow.log_table({k: [r[k] for r in rows] for k in rows[0]}, f"{table}.json")
    mlflow.log_metrics(metrics)
    for path in files:
        mlflow.log_artifact(str(path))
    mlflow.set_tag(COMPLETE, "true")


def profile_runs(
    host: str | None = None,
    env_id: str | None = None,
    algo: str | None = None,
    experiment: str = EXPERIMENT,
    precision: str | None = None,
) -> list[str]:
    """Ids of the complete FINISHED profile runs of `host`, `env_id`, `algo` and `precision`
    (where given; a profile without the param is fp32), newest first."""
    if mlflow.get_experiment_by_name(experiment) is None:
        return []
    conditions = [f"tags.`rlbench.role` = '{ROLE}'", "attributes.status = 'FINISHED'"]
    if host:
        conditions.append(f"tags.host = '{host}'")
    if env_id:
        conditions.append(f"tags.env_id = '{env_id}'")
    if algo:
        conditions.append(f"params.`algo.name` = '{algo}'")
    runs = mlflow.search_runs(
        experiment_names=[experiment],
        filter_string=" and ".join(conditions),
        order_by=["attributes.start_time DESC"],
        output_format="list",
    )
    return [
        r.info.run_id
        for r in runs
        if r.data.tags.get(COMPLETE) != "false"  # no tag: complete
        and (precision is None or r.data.params.get("precision", "fp32") == precision)
    ]


def is_profile(run: RunRecord) -> bool:
    return run.tags.get("rlbench.role") == ROLE


def incomplete(run: RunRecord) -> str | None:
    """Why the profile run cannot be used (not FINISHED, or not all of it logged), or None."""
    if run.status != "FINISHED":
        why = (
            run.tags.get("end_reason") or run.tags.get("error") or "its process may still be logging it, or was killed"
        )
        return f"status {run.status} ({why})"
    if run.tags.get(COMPLETE) == "false":
        return "FINISHED but not all of it was logged (tag profile_complete=false)"
    return None


def read_profile(run_id: str) -> ProfileRecord:
    """The run `run_id` and its tables (none read when it is not a profile run: see `is_profile`)."""
    run = read_run(run_id)
    tables = {name: logged_table(run_id, f"{name}.json") for name in TABLES} if is_profile(run) else {}
    return ProfileRecord(run, tables)
