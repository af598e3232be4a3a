"""mlruns/ is portable: a store moved elsewhere still finds every artifact (the client, the
report), and the report writes into the moved folder, not the old one."""

import shutil

import mlflow
import pytest

from rlbench.cli.report import main as report_main
from tests.conftest import CARTPOLE_TINY, rlbench_cli

pytestmark = pytest.mark.e2e


def test_a_moved_store_still_finds_and_writes_its_artifacts(store, tmp_path):
    first = tmp_path / "first" / "mlruns"
    first.mkdir(parents=True)
    shutil.copyfile(store["db"], first / "mlflow.db")  # the schema, made once per session
    uri = f"sqlite:///{first}/mlflow.db"
    overrides = [o for o in store["overrides"] if not o.startswith(("tracking.uri", "tracking.artifact_location"))]
    # a process of its own: MLflow caches each run's artifact folder per process (by run id),
    # and a moved store is read by a later process
    out = rlbench_cli(
        [
            "-m",
            "seed=1,2",
            *CARTPOLE_TINY,
            "actors=2",
            "progress=log",
            "telemetry.rate_hz=2",
            f"tracking.uri={uri}",
            *overrides,
        ],
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert sorted(p.name for p in first.iterdir()) == ["mlflow.db", "test"]  # artifacts beside the database

    moved = tmp_path / "elsewhere" / "copy"
    shutil.move(str(tmp_path / "first"), str(moved))
    moved_uri = f"sqlite:///{moved}/mlruns/mlflow.db"
    mlflow.set_tracking_uri(moved_uri)
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parent = next(r for r in runs if r.data.tags.get("rlbench.role") == "sweep")
    for run in runs:
        assert run.info.artifact_uri.startswith("rlbench-store:/test/"), run.info.artifact_uri
        names = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
        assert ("summary.csv" if run is parent else "config.yaml") in names
    job = next(r for r in runs if r is not parent)
    assert "seed: " in mlflow.artifacts.load_text(f"runs:/{job.info.run_id}/config.yaml")

    assert report_main(["--sweep", parent.info.run_id, "--tracking-uri", moved_uri, "--out", str(tmp_path / "r")]) == 0
    report = moved / "mlruns" / "test" / parent.info.run_id / "artifacts" / "report" / "report.html"
    assert report.is_file() and not (tmp_path / "first").exists()
    assert "report/report.html" in mlflow.get_run(parent.info.run_id).data.tags["mlflow.note.content"]
