"""The real trainer: Atari smoke job in MLflow, CartPole learning, truthful statuses."""

import json

import mlflow
import pytest

from rlbench.core.metrics import declared
from rlbench.prepare.job import job_of
from rlbench.train.job import run_job
from tests.conftest import CARTPOLE_TINY, runs, sigterm_once_running

CONTRACT = [
    "fps",
    "sps",
    "learner_updates_per_s",
    "episode_return",
    "loss",
    "inference_batch_mean",
    "inference_latency_ms",
    "runtime_s",
    "eval_frames",
    "replay_ratio",
    "task_replay_ratio",
    "replay_capacity",
]


@pytest.mark.e2e
def test_atari_smoke_job_is_recorded(compose_cfg, store):
    # the default config: MLflow's system metrics on (the store fixture turns them off elsewhere)
    cfg = compose_cfg(
        [
            "workload=smoke",
            "actors=4",
            "progress=log",
            *store["overrides"],
            "eval_envs=2",
            "tracking.system_metrics=true",
        ]
    )
    final = run_job(job_of(cfg, ["workload=smoke", "actors=4"]))
    (run,) = runs(store["uri"])
    assert any(k.startswith("system/") for k in run.data.metrics)  # what the contract check below must see
    assert run.info.status == "FINISHED" and run.info.run_name == "workload=smoke actors=4"
    for key in CONTRACT:
        assert key in run.data.metrics, key
    assert [k for k in run.data.metrics if not declared(k)] == []  # rlbench/core/metrics.py names everything logged
    assert run.data.metrics["frames"] >= 40000 and run.data.metrics["learner_updates"] == 1
    assert run.data.metrics["fps"] == pytest.approx(4 * run.data.metrics["sps"], rel=1e-5)  # each to 6 digits
    # 2 eval envs step beside the 4 actors but are not in the task's frames; with asynchronous
    # batches (3 of the 6 envs per forward) the ready ones go first, so an eval env may run a few
    # steps ahead of the actors' mean (CI saw 20012 eval frames against 40000 frames)
    m = run.data.metrics
    assert m["frames"] < 40000 + 4 * 4 and 0 < m["eval_frames"] <= 1.01 * m["frames"] / 2 + 4 * 2
    # SEED's coupling: the update took one insertion batch of int(64 / 0.75) = 85 unrolls from the queue
    assert m["replay_ratio"] == pytest.approx(64 / 85, rel=1e-5)
    assert m["op_frac/learner/queue_get"] > 0 and "op_frac/inference/queue_put" in m
    assert final["runtime_s"] >= final["frames"] / final["fps"]  # the task holds the actors' stepping time
    assert run.data.params["env.id"] == "pong"
    # hot_path.memory_format=auto on this CPU: the Nature-CNN torso ran channels_last
    assert run.data.params["hot_path.memory_format"] == "auto"
    assert run.data.tags["hot_path/memory_format"] == "channels_last"
    assert run.data.tags["overrides"] == "workload=smoke actors=4" and "overrides" not in run.data.params
    assert [(d.dataset.name, d.tags[0].value) for d in run.inputs.dataset_inputs] == [
        ("pong (atari, frameskip 4)", "environment")
    ]
    for tag in (
        "git_commit",
        "host",
        "cpu_model",
        "hardware_threads",
        "torch_version",
        "ale_py_version",
        "mlflow_version",
        "device",
    ):
        assert run.data.tags[tag], tag
    client = mlflow.MlflowClient()
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id)]
    assert {"config.yaml", "operations.json", "operations.png"} <= set(artifacts), artifacts
    table = mlflow.artifacts.load_dict(client.download_artifacts(run.info.run_id, "operations.json"))
    fractions = {f"{role}/{op}": f for role, op, f, _ in table["data"]}
    assert fractions["actors/env_step"] == pytest.approx(m["op_frac/actors/env_step"], abs=1e-4)
    assert "`fps`" in run.data.tags["mlflow.note.content"] and "`task_fps`" in run.data.tags["mlflow.note.content"]
    assert "ui.perfetto.dev" in run.data.tags["mlflow.note.content"]  # where its timeline opens
    assert [p.value for p in client.get_metric_history(run.info.run_id, "fps")] == [
        pytest.approx(final["fps"], rel=1e-5)
    ]
    window = client.get_metric_history(run.info.run_id, "window/fps")  # the series: while the actors step
    assert len(window) >= 1 and min(p.value for p in window) > 0
    assert m["task_fps"] == pytest.approx(m["frames"] / m["runtime_s"], rel=1e-4) and m["task_fps"] <= m["fps"]
    assert 0 < m["actors_done_s"] <= m["runtime_s"]
    _assert_drawn_comparably(client, run, final)


def _assert_drawn_comparably(client, run, final):
    """Final values at step 0 (the UI draws one bar per run); series against whole seconds since
    the task started, one point per step, a running value's last point after its last tick;
    the bound and the unmeasured energy as tags; the job's own chart view, linked from its note."""
    rid, last = run.info.run_id, -(-final["runtime_s"] // 1)
    for key in ("runtime_s", "task_fps", "fps", "op_frac/actors/env_step"):
        assert [p.step for p in client.get_metric_history(rid, key)] == [0], key
    for key in ("window/fps", "learner_updates", "frames"):
        steps = [p.step for p in client.get_metric_history(rid, key)]
        assert steps == sorted(set(steps)) and steps[-1] <= last, (key, steps)
    assert client.get_metric_history(rid, "learner_updates")[-1].step == last
    elapsed = client.get_metric_history(rid, "task_elapsed_s")  # the window charts' x axis: a tick's seconds
    assert elapsed and [p.step for p in elapsed] == [int(p.value) for p in elapsed]
    assert {p.step for p in client.get_metric_history(rid, "window/fps")} <= {p.step for p in elapsed}
    tags = run.data.tags
    assert tags["bound"].split()[0] in ("environment", "inference", "learner", "waiting"), tags["bound"]
    assert tags["energy_per_task_j"].startswith("not measured: ")  # no NVML, no RAPL on CI
    view = json.loads(mlflow.get_experiment(run.info.experiment_id).tags[f"mlflow.sharedViewState.rlbench-job-{rid}"])
    assert view["searchFilter"] == f"attributes.run_id = '{rid}'"
    assert [c["metricKey"] for c in view["compareRunCharts"][:3]] == ["runtime_s", "task_fps", "fps"]
    assert {
        c["metricKey"]: c.get("selectedXAxisMetricKey")
        for c in view["compareRunCharts"]
        if c["type"] == "LINE" and not c.get("deleted")
    }["window/fps"] == "task_elapsed_s"
    assert f"viewStateShareKey=rlbench-job-{rid}" in tags["mlflow.note.content"]


@pytest.mark.e2e
def test_seeds_coupling_holds_the_replay_ratio_in_every_window_and_blocks_the_actors(compose_cfg, store):
    """SEED's unroll queue: each update inserts int(32 / 4) = 8 fresh unrolls and samples 32, so
    every window's ratio is the configured 4 and the actors wait (queue_full_wait) while the
    learner is behind; the learner's tail is what the queue held when the actors stopped.
    (A unit test cannot give this: it is how the three threads wait for each other.)"""
    cfg = compose_cfg(
        [
            "env=cartpole",
            "workload=smoke",
            "workload.frames=72000",  # 3x the 24000 that ended in 2.8 s (2 windows) on CI's faster host
            "progress=log",
            "tracking.log_every_s=1",
            *store["overrides"],
        ]
    )
    job = job_of(cfg, ["env=cartpole"])
    final = run_job(job)
    (run,) = runs(store["uri"])
    window = [p.value for p in mlflow.MlflowClient().get_metric_history(run.info.run_id, "window/replay_ratio")]
    assert len(window) >= 3 and all(abs(r / 4.0 - 1) <= 0.10 for r in window), window
    assert abs(final["replay_ratio"] / 4.0 - 1) <= 0.10
    assert final["learner_updates"] == job.config.workload.learner_updates
    assert final["op_frac/inference/queue_full_wait"] > 0  # inference, and so the actors, blocked on a full queue
    updates_s = final["runtime_s"] / final["learner_updates"]  # each update moves 8 unrolls; the queue holds 100
    assert final["runtime_s"] - final["actors_done_s"] <= (1 + 100 / 8) * updates_s * 3, final
    _assert_steady_rates(run, final)


def _assert_steady_rates(run, final):
    """steady/*: the frames of the window/fps ticks after the warm-up and before the actors were
    done over their seconds (rlbench/core/steady.py): inside their range, fewer windows than the
    ticks, no power here."""
    from rlbench.tracking.unmeasured import unmeasured_of

    m, client = run.data.metrics, mlflow.MlflowClient()
    window = [p.value for p in client.get_metric_history(run.info.run_id, "window/fps")]
    reasons = unmeasured_of(run.data.tags)  # no NVML, no RAPL on CI: named with the reason, never 0
    assert m["steady/windows"] < len(window) and m["steady/s"] >= m["steady/windows"] * 0.99, (m, window)
    assert m["steady/s"] < final["actors_done_s"]
    if m["steady/windows"] < 3:  # a fast host finishes this task in few windows: no rate, and why
        assert "steady/fps" not in m and "3 needed" in reasons["steady/fps"], (m, reasons)
        return
    assert min(window) <= m["steady/fps_min"] <= m["steady/fps"] <= m["steady/fps_max"] <= max(window)
    assert m["steady/learner_updates_per_s"] > 0
    assert [p.step for p in client.get_metric_history(run.info.run_id, "steady/fps")] == [0]
    assert {"steady/power_gpu_w", "steady/power_cpu_w", "steady/frames_per_j"} <= set(
        reasons
    ) and "steady/power_gpu_w" not in m


@pytest.mark.e2e
@pytest.mark.slow
def test_r2d2_learns_cartpole(compose_cfg, store):
    """Same trainer as Atari; fixed seed; budget ~1.5 min on 2 cores. The bar is on the greedy
    evaluation envs (epsilon 0.001), not on the exploring actors."""
    cfg = compose_cfg(["env=cartpole", "seed=1", "progress=log", *store["overrides"], "eval_envs=2"])
    final = run_job(job_of(cfg, ["env=cartpole"]))
    assert final["runtime_s"] < 300
    assert final["eval_return_mean20"] >= 195, final
    (run,) = runs(store["uri"])
    evals = mlflow.MlflowClient().get_metric_history(run.info.run_id, "eval_return")
    assert len(evals) >= 20 and final["eval_frames"] > 0


@pytest.mark.e2e
@pytest.mark.slow
def test_vtrace_learns_cartpole(compose_cfg, store):
    """The on-policy agent through the same trainer, greedy evaluation as R2D2's: fixed seed,
    budget under 5 minutes on 2 cores."""
    args = ["env=cartpole", "algo=vtrace_vector", "workload=cartpole_onpolicy"]  # its task: 800k frames
    cfg = compose_cfg([*args, "seed=1", "progress=log", *store["overrides"], "eval_envs=2"])
    job = job_of(cfg, args)
    final = run_job(job)
    assert final["runtime_s"] < 300
    assert final["eval_return_mean20"] >= 195, final
    assert final["learner_updates"] == job.config.workload.learner_updates
    # the FIFO holds a batch (8) plus up to one unroll per actor (40): at most 6 batches queued ahead
    assert 0 <= final["policy_lag"] <= 1 + (8 + 40) / 8


@pytest.mark.e2e
def test_vtrace_atari_job_is_recorded_with_its_contract_metrics(compose_cfg, store):
    """V-trace on real Pong through the same trainer: short unrolls and batches keep it quick."""
    args = [
        "algo=vtrace",
        "workload=smoke",
        "workload.frames=4000",
        "actors=2",
        "workload.learner_updates=null",
        "algo.unroll_length=20",
        "inference_batch=0",  # lock-step: each actor steps exactly 500 times
        "algo.batch_size=8",
        "algo.network.lstm_hidden=32",
        "progress=log",
        *store["overrides"],
    ]
    final = run_job(job_of(compose_cfg(args), args[:5]))
    (run,) = runs(store["uri"])
    m = run.data.metrics
    assert run.info.status == "FINISHED" and [k for k in m if not declared(k)] == []
    # 500 agent steps per actor make 24 unrolls of 21 steps each: 48 unrolls, 6 batches of 8
    assert (m["unrolls"], m["learner_updates"], m["task_replay_ratio"]) == (48, 6, 1.0)
    assert m["policy_version"] == 6 and 0 <= m["policy_lag"] <= 6
    for key in (
        "vtrace/policy_loss",
        "vtrace/baseline_loss",
        "vtrace/entropy",
        "sim_share",
        "learner_share",
        "op_frac/inference/queue_put",
        "op_frac/learner/queue_get",
        "eval_frames",
    ):
        assert key in m, key
    assert "replay_ratio" not in m and "op_frac/learner/replay_sample" not in m
    assert 0 < m["vtrace/entropy"] <= 2.8904  # nats; log(18) for the full action set's 18 actions is the most there is
    assert run.data.params["algo.name"] == "vtrace" and final["frames"] >= 4000


@pytest.mark.e2e
def test_failing_job_is_recorded_failed(compose_cfg, store, monkeypatch):
    from rlbench.algo.r2d2.learner import R2D2Learner

    def boom(self):
        raise RuntimeError("injected learner failure")

    monkeypatch.setattr(R2D2Learner, "update", boom)
    cfg = compose_cfg([*CARTPOLE_TINY, "actors=2", "progress=log", *store["overrides"]])
    with pytest.raises(Exception, match="injected learner failure"):
        run_job(job_of(cfg))
    (run,) = runs(store["uri"])
    assert run.info.status == "FAILED"
    assert "injected learner failure" in run.data.tags["error"]


@pytest.mark.e2e
def test_sigterm_ends_run_killed_and_leaves_no_process(store):
    args = [
        "env=cartpole",
        "workload.frames=100000000",
        "workload.learner_updates=100000",
        "progress=log",
        *store["overrides"],
    ]
    assert sigterm_once_running(args, store["db"].parent / "out" / "__main__.log", timeout=90) != 0
    (run,) = runs(store["uri"])
    assert run.info.status == "KILLED"


@pytest.mark.e2e
def test_async_inference_forwards_only_the_ready_actors(compose_cfg, store):
    """inference_batch < actors: each forward takes the first k ready envs, not all of them."""
    from rlbench.prepare.plan import plan_job
    from rlbench.prepare.validate import validate
    from rlbench.train.trainer import train

    conf = validate(
        compose_cfg(
            [
                "workload=smoke",
                "actors=8",
                "inference_batch=4",
                "learner=false",
                "telemetry.enabled=false",
                "progress=log",
                *store["overrides"],
            ]
        )
    )
    final = train(plan_job(conf))
    assert final["inference_batch_mean"] == pytest.approx(4.0)
    assert final["frames"] >= 24000
