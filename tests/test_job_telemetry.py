"""Telemetry in a real job on this host, and the CUDA-event GPU-busy timer with a fake.

The real jobs run once per module (a fixture each) and several tests read what they logged:
one per branch of what this host can measure, each skipped, with its reason, where the host
cannot exercise it (a GPU present or not, RAPL readable or not).
"""

import json
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pytest
import torch

from rlbench.prepare.compose import compose_config
from rlbench.prepare.job import job_of
from rlbench.telemetry.gpu_busy import CudaBusyTimer, make_busy_timer
from rlbench.telemetry.nvml import NvmlSource
from rlbench.telemetry.rapl import RaplSource
from rlbench.tracking.unmeasured import unmeasured_of
from rlbench.train.job import run_job
from tests.conftest import CARTPOLE_TINY, runs


def _gpu_here() -> str | None:
    """What would give this host's jobs GPU numbers (CUDA for the busy timer, NVML for power), or None."""
    if torch.cuda.is_available():
        return "CUDA is available"
    nvml = NvmlSource()
    try:
        return "NVML sees a GPU" if nvml.available else None
    finally:
        nvml.close()


GPU_HERE, RAPL_HERE = _gpu_here(), RaplSource()
without_gpu = pytest.mark.skipif(GPU_HERE is not None, reason=f"this host has a GPU ({GPU_HERE}): its jobs measure it")
without_rapl = pytest.mark.skipif(
    RAPL_HERE.available, reason="RAPL is readable on this host: its jobs measure CPU energy"
)
with_rapl = pytest.mark.skipif(not RAPL_HERE.available, reason=f"RAPL is not readable on this host: {RAPL_HERE.reason}")


@dataclass
class Job:
    final: dict
    new_threads: set[str]  # alive after run_job that were not before it
    run: mlflow.entities.Run
    telemetry_artifacts: list[str]


def _real_job(folder, empty_store_db, overrides: list[str], job_overrides: list[str] | None = None) -> Job:
    """run_job on this host, tracked in a copy of the empty store in `folder` (the `store` fixture's
    settings; that fixture is per test, and these jobs are shared by a module's tests)."""
    shutil.copyfile(empty_store_db, folder / "mlflow.db")
    uri = f"sqlite:///{folder}/mlflow.db"
    tracking = [
        f"tracking.uri={uri}",
        f"tracking.artifact_location={folder}/artifacts",
        "tracking.experiment=test",
        "tracking.system_metrics=false",
        "eval_envs=0",
    ]
    cfg = compose_config([*overrides, *tracking])
    before = {t.name for t in threading.enumerate()}
    final = run_job(job_of(cfg, job_overrides))
    new_threads = {t.name for t in threading.enumerate()} - before
    (run,) = runs(uri)
    arts = [a.path for a in mlflow.MlflowClient(uri).list_artifacts(run.info.run_id, "telemetry")]
    return Job(final, new_threads, run, sorted(arts))


@pytest.fixture(scope="module")
def host_job(tmp_path_factory, empty_store_db) -> Job:
    """A 4-actor CartPole job with the default telemetry (no CPU energy estimate)."""
    return _real_job(
        tmp_path_factory.mktemp("host-job"),
        empty_store_db,
        [*CARTPOLE_TINY, "actors=4", "progress=log"],
        job_overrides=["env=cartpole", "workload=smoke"],
    )


@pytest.fixture(scope="module")
def estimate_job(tmp_path_factory, empty_store_db) -> Job:
    """A 2-actor CartPole job with telemetry.cpu_tdp_w=100: the CPU energy estimate where RAPL is unreadable."""
    return _real_job(
        tmp_path_factory.mktemp("estimate-job"),
        empty_store_db,
        [*CARTPOLE_TINY, "actors=2", "progress=log", "telemetry.cpu_tdp_w=100"],
    )


class FakeEvent:
    clock = 0.0

    def __init__(self, enable_timing):
        self.t = None

    def record(self):
        self.t = FakeEvent.clock

    def query(self):
        return self.t is not None

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3  # ms, as torch.cuda.Event


class FakeCuda:
    Event = FakeEvent


def test_cuda_busy_timer_sums_finished_spans():
    timer = CudaBusyTimer("cuda", cuda=FakeCuda)
    for start, length in [(0.0, 0.25), (1.0, 0.5)]:
        FakeEvent.clock = start
        with timer.span():
            FakeEvent.clock = start + length
    assert timer.busy_s() == pytest.approx(0.75)
    assert timer.busy_s() == pytest.approx(0.75)  # finished spans are counted once


def test_no_busy_timer_on_cpu_with_reason():
    timer, reason = make_busy_timer(torch.device("cpu"))
    assert timer is None and "no CUDA device" in reason


@pytest.mark.e2e
def test_real_job_records_telemetry(host_job):
    m, tags = host_job.run.data.metrics, host_job.run.data.tags
    assert host_job.new_threads == set()  # sampler joined
    assert host_job.run.info.status == "FINISHED"
    assert tags["energy_source_cpu"] in ("rapl", "none", "estimate")
    assert 0 < m["cpu_util_avg"] <= 1
    for op in ("env_step", "inference", "other"):
        assert 0 <= m[f"op_frac/actors/{op}"] <= 1
    assert "op_frac/learner/forward_backward" in m and "op_frac/inference/unroll_assembly" in m
    assert m["annotation_cost_us"] > 0 and m["telemetry_samples"] >= 2
    assert host_job.telemetry_artifacts == [
        "telemetry/telemetry.csv",
        "telemetry/telemetry.png",
        "telemetry/trace.json",
    ]
    final = host_job.final
    assert final["runtime_s"] >= final["frames"] / final["fps"]  # the task holds the actors' stepping time


@pytest.mark.e2e
def test_real_job_writes_a_timeline_with_a_track_per_role_thread(host_job):
    """trace.json (Perfetto / chrome://tracing): the actors' thread with central inference's
    operations nested in its `inference` spans, the learner, the sampler; no GPU track on CPU."""
    path = mlflow.MlflowClient().download_artifacts(host_job.run.info.run_id, "telemetry/trace.json")
    doc = json.loads(Path(path).read_text())
    threads = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert sorted(threads.values()) == ["actors (with central inference)", "learner", "telemetry sampler"]
    tid = {name: t for t, name in threads.items()}
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {(threads[e["tid"]], e["cat"], e["name"]) for e in spans}
    assert {
        ("actors (with central inference)", "actors", "env_step"),
        ("actors (with central inference)", "inference", "forward"),
        ("learner", "learner", "forward_backward"),
        ("telemetry sampler", "telemetry", "sample"),
    } <= names
    calls = [e for e in spans if e["cat"] == "actors" and e["name"] == "inference"]
    forward = next(e for e in spans if e["cat"] == "inference" and e["name"] == "forward")
    assert any(c["ts"] <= forward["ts"] and forward["ts"] + forward["dur"] <= c["ts"] + c["dur"] + 0.2 for c in calls)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans) and tid["learner"] != tid["telemetry sampler"]
    assert doc["rlbench"]["window_s"] == 10.0 and doc["rlbench"]["tracks"]["actors"]["dropped"] == 0


@pytest.mark.e2e
@without_gpu
def test_real_job_without_gpu_logs_no_gpu_numbers(host_job):
    m, tags = host_job.run.data.metrics, host_job.run.data.tags
    assert tags["energy_source_gpu"] == "none"
    for key in ("power_gpu_w_avg", "power_gpu_w_max", "energy_gpu_j", "gpu_busy_frac", "gpu_util_avg"):
        assert key not in m, key  # never a 0 W stand-in
        assert unmeasured_of(tags)[key], key


@pytest.mark.e2e
@without_gpu
@without_rapl
def test_real_job_without_any_energy_source_logs_no_energy_per_task(host_job):
    m, tags = host_job.run.data.metrics, host_job.run.data.tags
    assert tags["energy_source_cpu"] == "none"  # no RAPL, and no cpu_tdp_w to estimate with
    assert "energy_per_task_j" not in m and "energy_per_task_j" in unmeasured_of(tags)


@pytest.mark.e2e
@without_rapl
def test_cpu_estimate_is_labelled_as_an_estimate(estimate_job):
    m, tags = estimate_job.run.data.metrics, estimate_job.run.data.tags
    assert tags["energy_source_cpu"] == "estimate" and "cpu energy is an estimate" in tags["telemetry_cpu_reason"]
    assert m["energy_cpu_j"] > 0


@pytest.mark.e2e
@without_gpu
@without_rapl
def test_an_estimated_cpu_power_gives_no_perf_per_watt(estimate_job):
    m, tags = estimate_job.run.data.metrics, estimate_job.run.data.tags
    assert (tags["energy_source_cpu"], tags["energy_source_gpu"]) == ("estimate", "none")
    assert "perf_per_watt" not in m and unmeasured_of(tags)["perf_per_watt"]  # only measured watts count


@pytest.mark.e2e
@with_rapl
def test_cpu_tdp_is_unused_where_rapl_is_readable(estimate_job):
    assert estimate_job.run.data.tags["energy_source_cpu"] == "rapl"


def test_degraded_gpu_tags_the_run_and_keeps_what_was_measured(monkeypatch):
    from rlbench.config.schema import TelemetryConfig
    from rlbench.telemetry import job_telemetry

    summary = {k: None for k in job_telemetry.SUMMARY_KEYS}
    summary |= {
        "energy_gpu_j": 50.0,
        "energy_per_task_j": 50.0,
        "power_gpu_w_avg": 100.0,
        "energy_source_gpu": "nvml_counter",
        "energy_source_cpu": "none",
        "telemetry_gpu_reason": "GPU 0 lost after 12 samples (GPU is lost)",
    }
    jt = job_telemetry.JobTelemetry(TelemetryConfig(), torch.device("cpu"))
    monkeypatch.setattr(jt.sampler, "summary", lambda: summary)
    metrics, tags = jt.final({"fps": 200.0, "frames": 1_000_000, "runtime_s": 1.0}, [], {})
    assert tags["telemetry_gpu_reason"].startswith("GPU 0 lost")
    assert metrics["energy_gpu_j"] == 50.0 and metrics["perf_per_watt"] == pytest.approx(2.0)
    assert metrics["joules_per_mframe"] == pytest.approx(50.0)
    assert "energy_cpu_j" not in metrics and tags["null/energy_cpu_j"]


def test_the_timeline_covers_the_task_from_its_start_to_its_end_not_only_its_ticks(monkeypatch):
    """Op totals are remembered at the task's start and end as well as each 1 Hz tick: a learner
    that works only after the last tick (a short job's) still shows on the timeline."""
    import time

    from rlbench.config.schema import TelemetryConfig
    from rlbench.telemetry import job_telemetry
    from rlbench.telemetry.charts.timeline import op_shares, op_steps
    from rlbench.telemetry.timing import OpTimer

    actors, learner = OpTimer("actors"), OpTimer("learner")
    trainer = type("Trainer", (), {"timers": lambda self: [actors, learner], "op_walls": lambda self: {}})()
    jt = job_telemetry.JobTelemetry(TelemetryConfig(), torch.device("cpu"))
    monkeypatch.setattr(jt.sampler, "start", lambda: None)
    monkeypatch.setattr(jt.sampler, "summary", lambda: {k: None for k in job_telemetry.SUMMARY_KEYS})
    jt.started(trainer)
    with actors.op("env_step"):
        time.sleep(0.02)
    jt.tick_values(trainer)  # the only tick; the learner starts after it
    with learner.op("forward_backward"):
        time.sleep(0.05)
    jt.final_values({"fps": 1.0, "frames": 1, "runtime_s": 0.1}, trainer)
    times, actor_shares = op_shares(jt.op_ticks, "actors")
    assert len(times) == 2 and actor_shares["env_step"][0] > 0.5  # from the start to the tick
    _, learner_shares = op_shares(jt.op_ticks, "learner")
    assert learner_shares["forward_backward"][-1] > 0.5  # from the tick to the end
    x, drawn = op_steps(jt.op_ticks, "actors")  # drawn from the task's start: step="pre" needs its left edge
    assert x == [jt.op_ticks[0][0], *times] and drawn["env_step"][:2] == [actor_shares["env_step"][0]] * 2
