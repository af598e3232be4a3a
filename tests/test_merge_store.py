"""pipelines/merge_store.py: a store from another host merged into a local one, runs and all."""

import os
import shutil
import subprocess
import sys

import mlflow
import pytest
from mlflow.entities import Metric

from rlbench.config.schema import TrackingConfig
from rlbench.tracking.merge import MERGED, merge_store
from rlbench.tracking.store import open_experiment
from tests.conftest import ROOT


def a_study(folder, empty_store_db) -> str:
    """A store like the GPU study's: a sweep parent, a job with a metric history and an artifact."""
    (folder / "mlruns").mkdir(parents=True)
    shutil.copyfile(empty_store_db, folder / "mlruns" / "mlflow.db")
    uri = f"sqlite:///{folder}/mlruns/mlflow.db"
    exp = open_experiment(TrackingConfig(uri=uri, experiment="gpu_study"))
    client = mlflow.MlflowClient(uri)
    parent = client.create_run(exp, run_name="sweep actors=4,40", tags={"rlbench.role": "sweep"}).info.run_id
    job = client.create_run(exp, run_name="actors=40", tags={"mlflow.parentRunId": parent}).info.run_id
    client.log_param(job, "actors", "40")
    client.log_batch(job, metrics=[Metric("window/fps", v, 1000 + s, s) for s, v in enumerate((10.0, 20.0, 30.0))])
    (folder / "note.txt").write_text("telemetry")
    client.log_artifact(job, str(folder / "note.txt"), "telemetry")
    client.set_terminated(job, "FINISHED")
    client.set_terminated(parent, "KILLED")
    return uri


def test_a_study_merged_keeps_its_runs_histories_artifacts_and_parents_once(tmp_path, empty_store_db):
    src = a_study(tmp_path / "gpu", empty_store_db)
    (tmp_path / "local").mkdir()
    shutil.copyfile(empty_store_db, tmp_path / "local" / "mlflow.db")
    dst = f"sqlite:///{tmp_path}/local/mlflow.db"
    done = merge_store(src, dst, say=lambda line: None)
    assert (done.experiments, done.copied, done.skipped) == (1, 2, 0)
    client = mlflow.MlflowClient(dst)
    exp = client.get_experiment_by_name("gpu_study")
    assert exp.artifact_location == "rlbench-store:/gpu_study"  # the local store's own, portable form
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    job, parent = runs["actors=40"], runs["sweep actors=4,40"]
    assert job.data.tags["mlflow.parentRunId"] == parent.info.run_id  # re-linked to the copied parent
    assert (job.info.status, parent.info.status, job.data.params["actors"]) == ("FINISHED", "KILLED", "40")
    assert [m.value for m in client.get_metric_history(job.info.run_id, "window/fps")] == [10.0, 20.0, 30.0]
    mlflow.set_tracking_uri(dst)
    assert mlflow.artifacts.load_text(f"runs:/{job.info.run_id}/telemetry/note.txt") == "telemetry"
    assert (tmp_path / "local" / "gpu_study" / job.info.run_id / "artifacts" / "telemetry" / "note.txt").is_file()
    assert job.data.tags[MERGED] != job.info.run_id
    again = merge_store(src, dst, say=lambda line: None)
    assert (again.copied, again.skipped) == (0, 2) and len(client.search_runs([exp.experiment_id])) == 2


@pytest.mark.parametrize(
    "args, said",
    [
        (["{missing}"], "source=sqlite:///{missing}: {missing} does not exist"),
        (["{db}", "--into", "sqlite:///{db}"], "--into=sqlite:///{db}: is the source itself"),
    ],
)
def test_merging_what_cannot_be_merged_is_refused_in_one_line(tmp_path, empty_store_db, args, said):
    shutil.copyfile(empty_store_db, tmp_path / "mlflow.db")
    where = {"missing": str(tmp_path / "nowhere.db"), "db": str(tmp_path / "mlflow.db")}
    out = subprocess.run(
        [sys.executable, "pipelines/merge_store.py", *(a.format(**where) for a in args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 2 and said.format(**where) in out.stderr and len(out.stderr.strip().splitlines()) == 1, (
        out.stderr
    )
