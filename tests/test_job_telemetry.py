"""Telemetry in a real job on this host, and the CUDA-event GPU-busy timer with a fake."""

import threading

import mlflow
import pytest
import torch

from rlbench.job import run_job
from rlbench.telemetry.gpu_busy import CudaBusyTimer, make_busy_timer
from tests.conftest import CARTPOLE_TINY, runs


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


def test_real_job_records_energy_honestly_without_gpu(compose_cfg, store):
    cfg = compose_cfg([*CARTPOLE_TINY, "actors=4", "progress=log", *store["overrides"]])
    before = {t.name for t in threading.enumerate()}
    final = run_job(cfg, overrides=["env=cartpole", "workload=smoke"])
    assert {t.name for t in threading.enumerate()} - before == set()  # sampler joined
    (run,) = runs(store["uri"])
    m, tags = run.data.metrics, run.data.tags
    assert run.info.status == "FINISHED"
    if not torch.cuda.is_available():
        assert tags["energy_source_gpu"] == "none"
        for key in ("power_gpu_w_avg", "power_gpu_w_max", "energy_gpu_j", "gpu_busy_frac", "gpu_util_avg"):
            assert key not in m, key  # never a 0 W stand-in
            assert tags[f"null/{key}"], key
    assert tags["energy_source_cpu"] in ("rapl", "none", "estimate")
    if tags["energy_source_cpu"] == "none":
        assert "energy_per_task_j" not in m and "null/energy_per_task_j" in tags
    assert 0 < m["cpu_util_avg"] <= 1
    for op in ("env_step", "inference", "other"):
        assert 0 <= m[f"op_frac/actors/{op}"] <= 1
    assert "op_frac/learner/forward_backward" in m and "op_frac/inference/unroll_assembly" in m
    assert m["annotation_cost_us"] > 0 and m["telemetry_samples"] >= 2
    arts = [a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "telemetry")]
    assert sorted(arts) == ["telemetry/telemetry.csv", "telemetry/telemetry.png"]
    assert final["runtime_s"] > 0


def test_cpu_estimate_is_labelled_as_an_estimate(compose_cfg, store):
    cfg = compose_cfg([*CARTPOLE_TINY, "actors=2", "progress=log", "telemetry.cpu_tdp_w=100",
                       *store["overrides"]])
    run_job(cfg)
    (run,) = runs(store["uri"])
    src = run.data.tags["energy_source_cpu"]
    assert src in ("rapl", "estimate")
    if src == "estimate":
        assert run.data.metrics["energy_cpu_j"] > 0
        assert "perf_per_watt" not in run.data.metrics or run.data.tags["energy_source_gpu"] != "none"


def test_degraded_gpu_tags_the_run_and_keeps_what_was_measured(monkeypatch):
    from rlbench.config.schema import TelemetryConfig
    from rlbench.telemetry import job_telemetry

    summary = {k: None for k in job_telemetry.SUMMARY_KEYS}
    summary |= {"energy_gpu_j": 50.0, "energy_per_task_j": 50.0, "power_gpu_w_avg": 100.0,
                "energy_source_gpu": "nvml_counter", "energy_source_cpu": "none",
                "telemetry_gpu_reason": "GPU 0 lost after 12 samples (GPU is lost)"}
    jt = job_telemetry.JobTelemetry(TelemetryConfig(), torch.device("cpu"))
    monkeypatch.setattr(jt.sampler, "summary", lambda: summary)
    metrics, tags = jt.final({"fps": 200.0, "frames": 1_000_000, "runtime_s": 1.0}, [], {})
    assert tags["telemetry_gpu_reason"].startswith("GPU 0 lost")
    assert metrics["energy_gpu_j"] == 50.0 and metrics["perf_per_watt"] == pytest.approx(2.0)
    assert metrics["joules_per_mframe"] == pytest.approx(50.0)
    assert "energy_cpu_j" not in metrics and tags["null/energy_cpu_j"]
