"""A job's start: its MLflow run carries MLflow's user and source tags as rlbench sets them
(docs/testing.md, "what a job imports"), and `job_start_s`."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import mlflow

from tests.conftest import ROOT

OPEN_A_RECORD = """
import json, sys
from rlbench.prepare.compose import compose_config
from rlbench.prepare.validate import validate
from rlbench.tracking.record import JobRecord
cfg = compose_config(sys.argv[1:])
with JobRecord(validate(cfg), [], None) as record:
    pass
print(json.dumps({"run_id": record.run_id}))
"""


def test_opening_a_jobs_run_keeps_mlflows_source_tags(store):
    overrides = [o for o in store["overrides"] if not o.startswith("hydra.")]
    p = subprocess.run(
        [sys.executable, "-c", OPEN_A_RECORD, *overrides],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    mlflow.set_tracking_uri(store["uri"])
    run = mlflow.get_run(out["run_id"])
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["mlflow.user"] and tags["mlflow.source.name"] == "rlbench job" and tags["mlflow.runName"]


def test_job_start_s_runs_from_the_runs_creation_to_the_actors_first_step():
    from rlbench.train.recording import RecordObserver

    observer = RecordObserver(SimpleNamespace(opened_at=10.0), SimpleNamespace(eval_envs=0), [], None, {})
    trainer = SimpleNamespace(op_walls=dict, actors=SimpleNamespace(stepping_since=12.5))
    assert observer.final_values({}, trainer)[0]["job_start_s"] == 2.5
    trainer.actors.stepping_since = None  # the actors never stepped: no start to give, not a 0
    assert "job_start_s" not in observer.final_values({}, trainer)[0]
