"""Profile runs (`python -m rlbench.profile`): written, found and read back as plain data.

- `write_profile(...)`: a profile run (tag `rlbench.role=profile`, the host's tags) with its
  curves as JSON tables, its fit as metrics and its figure;
- `profile_runs(host, env_id, algo, experiment)`: the FINISHED profiles matching those, newest first;
- `read_profile(run_id)`: the run and the tables it logged (readers.NoSuchRun when there is none).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlflow

from rlbench.config.schema import TrackingConfig
from rlbench.tracking.fingerprint import host_tags
from rlbench.tracking.parent import source_tags
from rlbench.tracking.readers import RunRecord, logged_table, read_run
from rlbench.tracking.store import open_experiment

ROLE = "profile"
EXPERIMENT = "rlbench-profiles"  # where profiles are logged and looked for unless told otherwise
TABLES = ("env", "inference", "update", "corun", "power")  # <name>.json, as the model reads them


@dataclass(frozen=True)
class ProfileRecord:
    run: RunRecord
    tables: dict[str, list[dict]]    # name (without .json) -> rows; [] for a table the run has not


def write_profile(tracking: TrackingConfig, name: str, tags: dict[str, str], params: dict,
                  tables: dict[str, list[dict]], metrics: dict[str, float], files: list[Path]) -> str:
    """A FINISHED profile run in the experiment `tracking` names; returns its id. `tables`: name
    -> rows (logged as <name>.json; empty ones left out)."""
    with mlflow.start_run(experiment_id=open_experiment(tracking), run_name=name,
                          tags={**host_tags(), **source_tags(ROLE), "rlbench.role": ROLE, **tags}) as run:
        mlflow.log_params(params)
        for table, rows in tables.items():
            if rows:
                mlflow.log_table({k: [r[k] for r in rows] for k in rows[0]}, f"{table}.json")
        mlflow.log_metrics(metrics)
        for path in files:
            mlflow.log_artifact(str(path))
        return run.info.run_id


def profile_runs(host: str | None = None, env_id: str | None = None, algo: str | None = None,
                 experiment: str = EXPERIMENT) -> list[str]:
    """Ids of the FINISHED profile runs of `host`, `env_id` and `algo` (where given), newest first."""
    if mlflow.get_experiment_by_name(experiment) is None:
        return []
    conditions = [f"tags.`rlbench.role` = '{ROLE}'", "attributes.status = 'FINISHED'"]
    if host:
        conditions.append(f"tags.host = '{host}'")
    if env_id:
        conditions.append(f"tags.env_id = '{env_id}'")
    if algo:
        conditions.append(f"params.`algo.name` = '{algo}'")
    runs = mlflow.search_runs(experiment_names=[experiment], filter_string=" and ".join(conditions),
                              order_by=["attributes.start_time DESC"], output_format="list")
    return [r.info.run_id for r in runs]


def is_profile(run: RunRecord) -> bool:
    return run.tags.get("rlbench.role") == ROLE


def read_profile(run_id: str) -> ProfileRecord:
    """The run `run_id` and its tables (none read when it is not a profile run: see `is_profile`)."""
    run = read_run(run_id)
    tables = {name: logged_table(run_id, f"{name}.json") for name in TABLES} if is_profile(run) else {}
    return ProfileRecord(run, tables)
