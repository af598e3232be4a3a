"""A job's start: its MLflow run carries MLflow's user and source tags as rlbench sets them
(docs/results/startup.md, "What a job imports"), and `job_start_s`."""

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


def test_a_jobs_start_names_its_part_getting_the_envs_and_whether_they_were_kept():
    from rlbench.train.recording import RecordObserver
    from rlbench.train.trainer import EnvsGot

    observer = RecordObserver(SimpleNamespace(opened_at=10.0), SimpleNamespace(eval_envs=0), [], None, {})
    trainer = SimpleNamespace(op_walls=dict, actors=SimpleNamespace(stepping_since=12.5), envs_got=EnvsGot(2.0, True))
    values, tags = observer.final_values({}, trainer)
    assert values["job_start_envs_s"] == 2.0 and tags["envs_from_shelf"] == "false"
    trainer.envs_got = EnvsGot(0.001, made=False)
    values, tags = observer.final_values({}, trainer)
    assert values["job_start_envs_s"] == 0.001 and tags["envs_from_shelf"] == "true"
    trainer.envs_got = None  # actor processes: they make their own envs, so the start has no such part
    values, tags = observer.final_values({}, trainer)
    assert "job_start_envs_s" not in values
    assert tags["null/job_start_envs_s"].startswith("the actors' processes make their own envs")
