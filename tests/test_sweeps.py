"""Sweeps: one parent per multirun, isolated failures, resume, KILLED on SIGTERM."""

import json
import time

import mlflow
import pytest

from tests.conftest import CARTPOLE_TINY, main_in_process, plain_table, rlbench_cli, runs, sigterm_once_running

TINY = [*CARTPOLE_TINY, "actors=2", "progress=log", "telemetry.rate_hz=2"]


def _children(all_runs, parent):
    return [r for r in all_runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]


def _parents(all_runs):
    return [r for r in all_runs if r.data.tags.get("rlbench.role") == "sweep"]


@pytest.mark.e2e
def test_multirun_gives_parent_and_finished_children(store):
    # An exported MLFLOW_RUN_ID must not make the jobs resume some other run.
    out = main_in_process(
        ["-m", "seed=1,2,3", *TINY, *store["overrides"]],
        extra_env={"MLFLOW_RUN_ID": "0123456789abcdef0123456789abcdef"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    all_runs = runs(store["uri"])
    (parent,) = _parents(all_runs)
    kids = _children(all_runs, parent)
    assert parent.info.status == "FINISHED" and len(kids) == 3
    assert sorted(k.info.run_name for k in kids) == ["seed=1", "seed=2", "seed=3"]
    assert (
        f"[rlbench sweep] MLflow UI: http://127.0.0.1:5000/#/experiments/{parent.info.experiment_id}/runs?"
        f"viewStateShareKey=rlbench-{parent.info.run_id}&workflowType=machine_learning" in out.stdout
    )
    exp = mlflow.get_experiment(parent.info.experiment_id)
    view = json.loads(exp.tags[f"mlflow.sharedViewState.rlbench-{parent.info.run_id}"])
    assert view["searchFilter"] == f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    assert view["selectedColumns"][:4] == [
        "params.`seed`",
        "metrics.`runtime_s`",
        "metrics.`task_fps`",
        "metrics.`fps`",
    ]
    for k in kids:
        assert k.info.status == "FINISHED"
        for key in ("cpu_gpu_ratio", "sm_granted", "sm_total"):
            assert key in k.data.metrics and key not in k.data.params, key  # one value, one place
        assert k.data.tags["compute_unit"] == "cpu_thread" and len(k.data.tags["config_hash"]) == 16
        assert not [p for p in k.data.params if p.startswith("tracking.")] and "overrides" in k.data.tags
        assert k.data.tags["tracking.uri"] == store["uri"]
    arts = [a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id)]
    assert "summary.csv" in arts and "summary.json" in arts
    assert "job  name    status" in out.stdout and out.stdout.count("FINISHED") >= 3
    _assert_parent_is_a_starting_point(parent, kids)


def _assert_parent_is_a_starting_point(parent, kids):
    """Summary metrics per job and of the best job, a description, who ran it and from what."""
    best = min(kids, key=lambda k: k.data.metrics["runtime_s"])
    m, tags = parent.data.metrics, parent.data.tags
    assert m["jobs_finished"] == 3 and m["jobs_failed"] == 0
    assert m["best/runtime_s"] == best.data.metrics["runtime_s"] and m["best/fps"] == best.data.metrics["fps"]
    assert not [k for k in m if k.startswith("jobs/")]  # per job: the description's table
    note = plain_table(tags["mlflow.note.content"])  # the jobs table as it reads
    assert note.startswith("**rlbench sweep** seed=1,2,3 · FINISHED") and f"`{best.info.run_name}`" in note
    assert "[Jobs table](#/experiments/" in note and all(k.info.run_id in note for k in kids)
    for k in kids:  # each job's row: its numbers and its bound
        assert f"{k.data.metrics['runtime_s']:.4g}" in note and k.data.tags["bound"] in note
    assert f"python -m rlbench.report --sweep {parent.info.run_id}" in note  # the report's section, until it runs
    assert tags["mlflow.user"] and tags["mlflow.source.name"] == "rlbench sweep"
    assert tags["rlbench.command"].startswith("python -m rlbench -m seed=1,2,3")


@pytest.mark.e2e
def test_one_failing_job_does_not_stop_the_others(store):
    # seed=2's job gets a time limit it cannot meet: it fails at run time, after validation.
    args = ["-m", "workload.max_runtime_s=0,0.001,0", *TINY, "workload.learner_updates=20", *store["overrides"]]
    out = main_in_process(args)
    assert out.returncode == 1, out.stderr[-2000:]  # a job failed (docs/jobs.md, "A sweep's steps")
    all_runs = runs(store["uri"])
    (parent,) = _parents(all_runs)
    statuses = sorted(k.info.status for k in _children(all_runs, parent))
    assert statuses == ["FAILED", "FINISHED", "FINISHED"]
    assert parent.info.status == "FAILED"
    failed = next(k for k in _children(all_runs, parent) if k.info.status == "FAILED")
    assert "max_runtime_s" in failed.data.tags["error"]
    assert "traceback.txt" in [a.path for a in mlflow.MlflowClient().list_artifacts(failed.info.run_id)]
    assert "1 of 3 jobs failed: workload.max_runtime_s=0.001" in out.stderr


@pytest.mark.e2e
def test_resume_skips_finished_jobs(store):
    args = ["-m", "seed=1,2", *TINY, *store["overrides"]]
    assert main_in_process(args).returncode == 0
    out = main_in_process(["-m", "seed=1,2,3", "resume=true", *TINY, *store["overrides"]])
    assert out.returncode == 0, out.stderr[-2000:]
    kids = [r for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") != "sweep"]
    assert sorted(k.info.run_name for k in kids) == ["seed=1", "seed=2", "seed=3"]  # 1 and 2 not rerun
    assert "resume: 2 of 3 jobs already FINISHED, not rerun" in out.stdout
    # another sweep's parent holds them: the new parent's summary names their runs, so its report sees all 3
    from rlbench.tracking.readers import read_sweep

    (parent,) = [
        r for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") == "sweep" and r.data.params.get("jobs") == "3"
    ]
    assert sorted(k.name for k in read_sweep(parent.info.run_id).children) == ["seed=1", "seed=2", "seed=3"]


def test_out_of_range_limits_refused_before_job_0(store, rlbench_main):
    out = rlbench_main(["-m", "sm_limit=1,64", *TINY, *store["overrides"]])
    assert out.returncode == 2 and "sm_limit=64" in out.stderr and "no job started" in out.stderr
    out = rlbench_main(["-m", "actor_threads=1,999", *TINY, *store["overrides"]])
    assert out.returncode == 2 and "actor_threads=999" in out.stderr
    assert runs(store["uri"]) == []


@pytest.mark.e2e
def test_sigterm_mid_sweep_leaves_no_running_run_and_no_process(store):
    args = [
        "-m",
        "seed=1,2",
        "env=cartpole",
        "workload.frames=100000000",
        "workload.learner_updates=100000",
        "progress=log",
        *store["overrides"],
    ]
    assert sigterm_once_running(args, store["db"].parent / "multirun" / "0" / "__main__.log") != 0
    all_runs = runs(store["uri"])
    assert all_runs and not [r for r in all_runs if r.info.status == "RUNNING"]
    (parent,) = _parents(all_runs)
    assert parent.info.status == "KILLED"
    assert [k.info.status for k in _children(all_runs, parent)] == ["KILLED"]


def test_stale_running_run_is_marked_failed(store, compose_cfg):
    from rlbench.prepare.validate import validate
    from rlbench.tracking.store import mark_stale_runs, open_experiment

    conf = validate(compose_cfg(store["overrides"] + ["tracking.stale_after_s=30"]))  # heartbeats 60 s old are stale
    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    run = client.create_run(open_experiment(conf.tracking), tags={"heartbeat": f"{time.time() - 60:.0f}"})
    fresh = client.create_run(open_experiment(conf.tracking), tags={"heartbeat": f"{time.time() + 60:.0f}"})
    assert mark_stale_runs(conf.tracking) == [run.info.run_id]
    assert client.get_run(run.info.run_id).info.status == "FAILED"
    assert client.get_run(fresh.info.run_id).info.status == "RUNNING"
    # A search's parent (no heartbeat of its own) lives while a worker's trial heartbeats.
    exp = open_experiment(conf.tracking)
    study = client.create_run(exp, start_time=int((time.time() - 60) * 1000), tags={"rlbench.role": "study"})
    client.create_run(exp, tags={"mlflow.parentRunId": study.info.run_id, "heartbeat": f"{time.time() + 60:.0f}"})
    assert mark_stale_runs(conf.tracking) == []
    assert client.get_run(study.info.run_id).info.status == "RUNNING"


@pytest.mark.e2e
@pytest.mark.parametrize("launcher", ["parallel", "local_submitit"])
def test_parallel_jobs_on_sqlite_all_recorded(store, launcher):
    """Jobs at once, all writing to one SQLite store: 2 joblib workers running 2 jobs each, or
    submitit's local executor running 2 jobs as SLURM would (each in a process of its own)."""
    workers = ["hydra.launcher.n_jobs=2"] if launcher == "parallel" else []
    seeds = ["seed=1", "seed=2", "seed=3", "seed=4"] if launcher == "parallel" else ["seed=1", "seed=2"]
    # sm_limit=1: one torch intra-op thread per job; 4 jobs each with all cores' threads take
    # minutes instead of seconds on a 2-core host
    args = [
        "-m",
        f"hydra/launcher={launcher}",
        *workers,
        f"seed={','.join(s[5:] for s in seeds)}",
        *TINY,
        "sm_limit=1",
        *store["overrides"],
    ]
    out = rlbench_cli(args, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    all_runs = runs(store["uri"])
    (parent,) = _parents(all_runs)
    kids = _children(all_runs, parent)
    assert sorted(k.info.run_name for k in kids) == seeds
    assert all(k.info.status == "FINISHED" for k in kids) and parent.info.status == "FINISHED"


def test_onoff_policy_experiment_sweeps_both_algorithms_on_one_task(compose_cfg):
    from hydra import compose, initialize_config_dir

    from rlbench.prepare.compose import CONF_DIR
    from rlbench.prepare.validate import validate

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=onoff_policy"], return_hydra_config=True)
    assert cfg.hydra.sweeper.params.algo == "r2d2,vtrace"
    confs = {
        a: validate(compose_cfg(["experiment=onoff_policy", "workload=smoke", f"algo={a}"])) for a in ("r2d2", "vtrace")
    }
    assert {c.algo.name for c in confs.values()} == {"r2d2", "vtrace"}
    assert len({(c.env.id, c.actors, c.workload.frames) for c in confs.values()}) == 1  # the same task
    # each algorithm's own rule for the updates: R2D2 one insertion batch of int(64 / 0.75) = 85
    # sequences per update (SEED's unroll queue); V-trace every unroll once, 32 per update
    assert confs["r2d2"].workload.learner_updates == 40000 // 4 // 80 // 85 == 1
    assert confs["vtrace"].workload.learner_updates == 40 * ((40000 // 4 // 40 - 1) // 100) // 32 == 2


def test_ui_url_opens_the_sweeps_runs_in_the_model_training_view():
    from rlbench.tracking.store import ui_hint, ui_runs_url

    url = ui_runs_url("sqlite:///mlruns/mlflow.db", "7", "rlbench-ab12")
    assert (
        url == "http://127.0.0.1:5000/#/experiments/7/runs?viewStateShareKey=rlbench-ab12&workflowType=machine_learning"
    )
    assert ui_runs_url("http://mlflow.lab:5000/", "7", "ab12").startswith(
        "http://mlflow.lab:5000/#/experiments/7/runs?"
    )
    assert ui_hint("sqlite:///x.db", "7", "ab12").endswith(
        "(start it: mlflow ui --app-name rlbench --backend-store-uri sqlite:///x.db)"
    )
    assert "start it" not in ui_hint("https://mlflow.lab", "7", "ab12")
    other = ui_hint("sqlite:///x.db", "7", "ab12", 5123)  # tracking.ui_port: the address and the command agree
    assert other.startswith("MLflow UI: http://127.0.0.1:5123/#/experiments/7/runs?") and other.endswith(
        "(start it: mlflow ui --app-name rlbench --backend-store-uri sqlite:///x.db --port 5123)"
    )


def test_top_level_runs_of_the_same_overrides_get_unique_names(store):
    from rlbench.tracking.store import unique_top_level_name

    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    exp = client.create_experiment("names", artifact_location=str(store["db"].parent / "artifacts"))
    assert unique_top_level_name(exp, "workload=smoke") == "workload=smoke"
    client.create_run(exp, run_name="workload=smoke")
    client.create_run(exp, run_name="workload=smoke #2")
    client.create_run(exp, run_name="workload=smoke #3", tags={"mlflow.parentRunId": "0" * 32})  # a sweep's job
    assert unique_top_level_name(exp, "workload=smoke") == "workload=smoke #3"
    client.create_run(exp, run_name="env.id=space_invaders")  # LIKE's `_` and quotes do not confuse it
    assert unique_top_level_name(exp, "env.id=space_invaders") == "env.id=space_invaders #2"
    assert unique_top_level_name(exp, "env.id=spaceXinvaders") == "env.id=spaceXinvaders"
    client.create_run(exp, run_name="tracking.tags.note='it''s'")
    assert unique_top_level_name(exp, "tracking.tags.note='it''s'") == "tracking.tags.note='it''s' #2"


def test_summary_table_says_why_a_value_is_missing():
    from rlbench.sweeps.sweep import summary_text

    why = {
        "energy_per_task_j": "no measured power (see the GPU and CPU reasons)",
        "energy_gpu_j": "nvmlInit failed",
        "energy_cpu_j": "no RAPL",
    }
    rows = [
        {
            "job": i,
            "name": f"actors={a}",
            "status": "FINISHED",
            "runtime_s": 10.0,
            "task_fps": 95.0,
            "fps": 100.0,
            "energy_per_task_j": None,
            "cpu_gpu_ratio": 1.0,
            "unmeasured": why,
        }
        for i, a in enumerate((4, 40))
    ]
    rows.append(
        {
            "job": 2,
            "name": "actors=256",
            "status": "FAILED",
            "runtime_s": None,
            "fps": None,
            "energy_per_task_j": None,
            "cpu_gpu_ratio": None,
        }
    )
    lines = summary_text(rows).splitlines()
    # each reason once; a failed job's empty cells are its failure, not a missing measurement
    assert lines[-1] == (
        "- energy_per_task_j: no measured power (see the GPU and CPU reasons); "
        "energy_cpu_j: no RAPL; energy_gpu_j: nvmlInit failed"
    )
    assert len(lines) == 5
    rows[0]["unmeasured"] = {}
    assert summary_text(rows[:1]).splitlines()[-1] == "- energy_per_task_j: not recorded (no reason logged)"
