"""The Python API (rlbench/api/): rlbench.sweep, rlbench.search and rlbench.make_report run in this
process and return objects; refusals raise the typed errors the commands map to exit codes. The
sweep options every sweep may use (sweep.warmup, sweep.idle_power_s), refused through the real
command where they cannot hold."""

import logging

import mlflow
import pytest

import rlbench
from rlbench.core.errors import Refusal
from rlbench.searches.run import SearchResult
from rlbench.sweeps.sweep import SweepResult
from tests.conftest import CARTPOLE_TINY, rlbench_cli

TINY = [*CARTPOLE_TINY, "progress=log", "telemetry.rate_hz=2"]


def _runs(uri: str, experiment: str = "test") -> list:
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name(experiment)
    return [] if exp is None else mlflow.search_runs([exp.experiment_id], output_format="list")


def test_a_refused_sweep_raises_the_typed_error_before_any_run(store):
    with pytest.raises(Refusal, match=r"actors=0: allowed: an integer >= 1"):
        rlbench.sweep(["actors=2,0", *TINY, *store["overrides"]])  # refused by the sweep's check of every job
    with pytest.raises(Refusal, match=r"no such env preset"):
        rlbench.sweep(["env=nope", *store["overrides"]])  # refused before Hydra makes a folder
    assert _runs(store["uri"]) == []


def test_sweep_and_search_refuse_each_others_overrides():
    with pytest.raises(Refusal, match=r"allowed: rlbench.search\(overrides\)"):
        rlbench.sweep(["search=ratio"])
    with pytest.raises(Refusal, match=r"allowed: overrides with search=<preset>"):
        rlbench.search(["actors=4"])


def test_make_report_refuses_a_run_that_is_not_there(store):
    with pytest.raises(Refusal, match=r"--sweep 0{32}: no such run"):
        rlbench.make_report("0" * 32, tracking_uri=store["uri"], log=False)
    with pytest.raises(Refusal, match=r"allowed: exactly one of them"):
        rlbench.make_report("0" * 32, experiment="x", tracking_uri=store["uri"])


@pytest.mark.e2e
def test_a_sweep_returns_its_parent_rows_and_verdict_and_its_report_reads_the_same(store, tmp_path):
    root = logging.getLogger()
    handlers = root.handlers[:]
    result = rlbench.sweep(["actors=2,4", *TINY, *store["overrides"]])
    assert root.handlers == handlers  # Hydra's logging set up for the sweep is put back
    assert isinstance(result, SweepResult) and result.status == "FINISHED"
    assert [r["status"] for r in result.rows] == ["FINISHED", "FINISHED"]
    assert {r["name"] for r in result.rows} == {"actors=2", "actors=4"} and result.verdict.best in {
        "actors=2",
        "actors=4",
    }
    (parent,) = [r for r in _runs(store["uri"]) if r.data.tags.get("rlbench.role") == "sweep"]
    assert parent.info.run_id == result.parent_run_id and parent.info.status == "FINISHED"
    assert {r["run_id"] for r in result.rows} == {
        r.info.run_id for r in _runs(store["uri"]) if r.data.tags.get("mlflow.parentRunId") == result.parent_run_id
    }
    report = rlbench.make_report(result.parent_run_id, tracking_uri=store["uri"], out=tmp_path / "report")
    assert report.finished == 2 and report.jobs == 2 and report.html.is_file()
    assert report.logged_on == result.parent_run_id
    assert any(result.verdict.best in line for line in report.lines)  # one verdict: the sweep's and the report's


@pytest.mark.e2e
def test_a_sweep_with_a_failed_job_returns_its_result_failed(store):
    result = rlbench.sweep(["actors=2,4", *TINY, "workload.max_runtime_s=0.01", *store["overrides"]])
    assert result.status == "FAILED" and {r["status"] for r in result.rows} == {"FAILED"}
    assert all("max_runtime_s" in r["error"] or "runtime" in r["error"] for r in result.rows), result.rows


@pytest.mark.e2e
def test_a_search_returns_its_parent_trials_and_best(store, tmp_path):
    result = rlbench.search(
        [
            "search=ratio",
            f"search.storage=sqlite:///{tmp_path}/optuna.db",
            "search.study=api",
            "search.n_trials=2",
            "search.actors=[2,4]",
            "search.actor_threads=[1,1]",
            "search.objectives=[fps]",
            "search.directions=[maximize]",
            *TINY,
            *store["overrides"],
        ]
    )
    assert isinstance(result, SearchResult) and result.status == "FINISHED" and result.study == "api"
    assert len([r for r in result.rows if r["status"] == "FINISHED"]) == 2
    assert result.best is not None and result.best["actors"] in (2, 3, 4)


@pytest.mark.e2e
def test_a_warm_up_and_the_idle_power_come_first_and_are_never_a_job(store):
    args = ["actors=2,4", *TINY, "sweep.warmup=true", "sweep.idle_power_s=0.2", *store["overrides"]]
    result = rlbench.sweep(args)
    children = [r for r in _runs(store["uri"]) if r.data.tags.get("mlflow.parentRunId") == result.parent_run_id]
    warm = [r for r in children if r.data.tags.get("role") == "warmup"]
    idle = [r for r in children if r.data.tags.get("rlbench.role") == "idle_power"]
    assert len(warm) == 1 and warm[0].info.run_name == "warmup" and warm[0].info.status == "FINISHED"
    assert len(idle) == 1 and "idle_power_gpu_w: no NVML" in idle[0].data.tags["unmeasured"]  # null with its reason
    first = min(r.info.start_time for r in children if r not in warm + idle)
    assert warm[0].info.end_time <= first and idle[0].info.start_time <= warm[0].info.start_time
    assert len(result.rows) == 2 and warm[0].info.run_id not in {r["run_id"] for r in result.rows}
    again = rlbench.sweep([*args, "resume=true"])  # both finished: nothing reruns, the warm-up counts as no job
    assert again.parent_run_id == result.parent_run_id and all(r.get("resumed") for r in again.rows)
    assert {r["run_id"] for r in again.rows} == {r["run_id"] for r in result.rows}


@pytest.mark.e2e
def test_the_sweep_options_are_refused_through_the_command_where_they_cannot_hold(store):
    for extra, says in (
        (
            ["hydra/launcher=joblib", "sweep.warmup=true"],
            "sweep.warmup=true with JoblibLauncher: allowed with the basic",
        ),
        (["sweep.idle_power_s=1,2"], "sweep.idle_power_s=1,2: allowed: one value per sweep, not a list"),
        (["sweep.idle_power_s=-1"], "sweep.idle_power_s=-1"),
    ):
        out = rlbench_cli(["-m", "actors=2", *TINY, *extra, *store["overrides"]], timeout=120)
        assert out.returncode == 2, out.stderr[-2000:]
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith("rlbench: ") and says in out.stderr, out.stderr[-2000:]
    assert [r for r in _runs(store["uri"]) if r.data.tags.get("rlbench.role") != "sweep"] == []
