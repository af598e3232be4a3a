"""TelemetrySampler: rows and summary on fakes, thread lifecycle, failure handling, real machine."""

from __future__ import annotations

import csv
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rlbench.telemetry import SUMMARY_KEYS, TelemetrySampler
from rlbench.telemetry.cpu import CpuSample, CpuSource
from rlbench.telemetry.nvml import NvmlSource
from rlbench.telemetry.rapl import RaplSource
from tests.conftest import wait_until

from .fakes import FakeClock, FakeGpu, FakeNvml, FakePowercap, FakeProcess, FakePsutil

ROOT = Path(__file__).resolve().parents[2]


class FixedCpu:
    """A CPU source reporting a fixed utilisation."""

    def __init__(self, util: float = 0.5) -> None:
        self.util = util

    def sample(self) -> CpuSample:
        return CpuSample((self.util, self.util), self.util, self.util / 2, self.util)


class Flaky:
    """Wraps a source; raises on the calls listed in `fail_on` (1-based), or on every call.
    `reached` is set at call `target`: the sampler is then taking its `target`-th row (the
    first is start()'s), so a test waits on it instead of sleeping."""

    def __init__(self, inner: object, fail_on: set[int] | None = None, target: int = 1) -> None:
        self.inner, self.fail_on, self.target, self.calls = inner, fail_on, target, 0
        self.reached = threading.Event()

    def sample(self) -> object:
        self.calls += 1
        if self.calls >= self.target:
            self.reached.set()
        if self.fail_on is None or self.calls in self.fail_on:
            raise RuntimeError(f"injected failure {self.calls}")
        return self.inner.sample()


def counted(inner: object, target: int) -> Flaky:
    """A source that never fails; its `reached` is set at its `target`-th sample."""
    return Flaky(inner, fail_on=frozenset(), target=target)


WAIT_S = 10.0  # deadline for the sampling thread to reach a state; generous for a loaded machine


def telemetry_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "telemetry"]


def fake_sampler(tmp_path: Path, gpu: FakeGpu, clock: FakeClock, **kw: object) -> tuple[TelemetrySampler, FakePowercap]:
    sysfs = FakePowercap(tmp_path / "powercap")
    sysfs.add_package(0, energy_uj=0, dram=(0, 2**32))
    rapl = RaplSource(sysfs.root, reader=sysfs.read)
    nvml = NvmlSource(FakeNvml([gpu]))
    return TelemetrySampler(100.0, nvml=nvml, rapl=rapl, cpu=FixedCpu(), clock=clock, **kw), sysfs


def test_rows_and_summary_on_fakes(tmp_path: Path) -> None:
    gpu, clock = FakeGpu(power_mw=100_000, energy_mj=5_000_000), FakeClock(50.0)
    sampler, sysfs = fake_sampler(tmp_path, gpu, clock)
    for k in range(3):  # t = 50, 51, 52: the GPU counter gains 100 J/s, RAPL 30 J/s, DRAM 2 J/s
        sysfs.set_energy(sysfs.root / "intel-rapl:0", 30_000_000 * k)
        sysfs.set_energy(sysfs.dram(0), 2_000_000 * k)
        sampler.sample_now()
        gpu.energy_mj += 100_000
        clock.advance(1.0)
    rows = sampler.rows()
    assert [r["t"] for r in rows] == [50.0, 51.0, 52.0]
    assert rows[1] == {
        "t": 51.0, "gpu0_power_w": 100.0, "gpu0_energy_mj": 100_000, "gpu0_util": 0.5,
        "gpu0_mem_util": 0.2, "gpu0_sm_clock_mhz": 1500.0, "gpu0_mem_used_mb": 2048.0,
        "gpu0_temp_c": 60.0, "cpu_util": 0.5, "proc_util": 0.25, "proc_cores_busy": 0.5,
        "cpu_pkg_energy_j": 30.0, "dram_energy_j": 2.0, "cpu_core0_util": 0.5, "cpu_core1_util": 0.5,
    }  # fmt: skip
    s = sampler.summary()
    assert tuple(s) == SUMMARY_KEYS
    assert (s["energy_gpu_j"], s["energy_source_gpu"]) == (pytest.approx(200.0), "nvml_counter")
    assert (s["energy_cpu_j"], s["energy_source_cpu"]) == (pytest.approx(60.0), "rapl")
    assert s["energy_dram_j"] == pytest.approx(4.0)
    assert s["energy_per_task_j"] == pytest.approx(264.0)
    assert (s["power_gpu_w_avg"], s["power_gpu_w_max"], s["power_cpu_w_avg"]) == (100.0, 100.0, 30.0)
    assert (s["gpu_util_avg"], s["cpu_util_avg"]) == (0.5, 0.5)
    assert s["telemetry_gpu_reason"] is None and s["telemetry_cpu_reason"] is None


def test_power_integration_when_counter_not_supported(tmp_path: Path) -> None:
    gpu, clock = FakeGpu(unsupported={"nvmlDeviceGetTotalEnergyConsumption"}), FakeClock()
    sampler, _ = fake_sampler(tmp_path, gpu, clock)
    for watts in (100, 200, 300):  # 1 s apart: 150 + 250 = 400 J
        gpu.power_mw = watts * 1000
        sampler.sample_now()
        clock.advance(1.0)
    s = sampler.summary()
    assert (s["energy_gpu_j"], s["energy_source_gpu"]) == (pytest.approx(400.0), "nvml_power")
    assert "energy (not_supported)" in s["telemetry_gpu_reason"]


def test_cpu_estimate_only_when_rapl_is_unavailable(tmp_path: Path) -> None:
    clock = FakeClock()
    sampler = TelemetrySampler(nvml=None, rapl=RaplSource(tmp_path / "none"), cpu=FixedCpu(0.5),
                               clock=clock, cpu_tdp_w=100.0, cpu_idle_frac=0.3)  # fmt: skip
    for _ in range(3):
        sampler.sample_now()
        clock.advance(5.0)
    s = sampler.summary()
    assert (s["energy_cpu_j"], s["energy_source_cpu"]) == (pytest.approx(650.0), "estimate")  # 65 W x 10 s
    assert s["telemetry_cpu_reason"].startswith("no powercap directory")
    assert "estimate" in s["telemetry_cpu_reason"]
    assert s["telemetry_gpu_reason"] == "gpu telemetry disabled; no GPU samples"


def test_start_stop_leaves_no_thread() -> None:
    cpu = counted(FixedCpu(), target=10)
    sampler = TelemetrySampler(200.0, nvml=None, rapl=None, cpu=cpu)
    t0 = time.monotonic()
    sampler.start()
    (thread,) = telemetry_threads()
    assert not thread.daemon and sampler.running
    assert cpu.reached.wait(WAIT_S), f"the thread took {cpu.calls - 1} rows in {WAIT_S} s, not 9"
    sampler.stop()
    elapsed = time.monotonic() - t0
    sampler.stop()  # idempotent
    assert telemetry_threads() == [] and not thread.is_alive() and not sampler.running
    n = len(sampler.rows())  # start's row, >= 9 of the thread's, stop's row
    assert 11 <= n <= 3 + 2 * 200 * elapsed, (n, elapsed)  # paced at 200 Hz (2x slack), not spinning
    with pytest.raises(RuntimeError):
        sampler.start()


def test_context_manager_and_csv(tmp_path: Path) -> None:
    cpu = counted(FixedCpu(), target=3)
    with TelemetrySampler(200.0, nvml=None, rapl=None, cpu=cpu) as sampler:
        assert cpu.reached.wait(WAIT_S), "the sampling thread took no rows inside the with block"
    assert telemetry_threads() == []
    path = sampler.to_csv(tmp_path / "telemetry.csv")
    with path.open() as f:
        read = list(csv.DictReader(f))
    assert len(read) == len(sampler.rows()) >= 4  # start's row, >= 2 of the thread's, stop's row
    assert list(read[0]) == ["t", "cpu_util", "proc_util", "proc_cores_busy", "cpu_core0_util", "cpu_core1_util"]
    assert float(read[0]["cpu_util"]) == 0.5


def test_keeps_sampling_after_injected_exceptions() -> None:
    gpu = Flaky(NvmlSource(FakeNvml()), fail_on={2, 3}, target=8)
    sampler = TelemetrySampler(200.0, nvml=gpu, rapl=None, cpu=FixedCpu())
    with sampler:
        assert gpu.reached.wait(WAIT_S), f"only {gpu.calls} GPU samples in {WAIT_S} s"
    rows = sampler.rows()
    assert sampler.error_count == 2
    assert sampler.errors == ["gpu: RuntimeError: injected failure 2", "gpu: RuntimeError: injected failure 3"]
    assert "gpu0_power_w" not in rows[1] and rows[1]["cpu_util"] == 0.5  # other sources still sampled
    assert rows[-1]["gpu0_power_w"] == 100.0  # and the GPU again afterwards
    assert "gpu sampling raised 2 times" in sampler.summary()["telemetry_gpu_reason"]


def test_a_source_that_keeps_failing_is_reported() -> None:
    clock = FakeClock()
    sampler = TelemetrySampler(nvml=None, rapl=None, cpu=Flaky(FixedCpu()), clock=clock, fail_after=3)
    for _ in range(4):
        sampler.sample_now()
        clock.advance(0.1)
    assert len(sampler.rows()) == 4 and sampler.error_count == 4
    assert "cpu sampling failed 4 times in a row (last: cpu: RuntimeError" in sampler.summary()["telemetry_cpu_reason"]


def test_gpu_lost_mid_run_keeps_sampler_running() -> None:
    gpu = FakeGpu(lost_after=6 * 5)  # five full passes, then every call raises GpuIsLost
    nvml, cpu = NvmlSource(FakeNvml([gpu])), counted(FixedCpu(), target=12)
    with TelemetrySampler(200.0, nvml=nvml, rapl=None, cpu=cpu) as sampler:
        assert cpu.reached.wait(WAIT_S), f"only {cpu.calls} rows in {WAIT_S} s"
    assert telemetry_threads() == [] and sampler.errors == []
    rows = sampler.rows()
    assert [r["gpu0_power_w"] for r in rows[:5]] == [100.0] * 5
    assert all(r["gpu0_power_w"] is None and r["cpu_util"] == 0.5 for r in rows[6:])
    s = sampler.summary()
    assert "gpu0 lost: gpu_is_lost" in s["telemetry_gpu_reason"]
    assert s["energy_source_gpu"] == "nvml_counter" and s["power_gpu_w_avg"] == 100.0


def test_owned_sources_are_closed_on_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    monkeypatch.setattr("rlbench.telemetry.nvml.NvmlSource", lambda: NvmlSource(fake))
    with TelemetrySampler(200.0, rapl=None, cpu=FixedCpu()):
        pass
    assert fake.calls["nvmlShutdown"] == 1
    injected = NvmlSource(fake)
    with TelemetrySampler(200.0, nvml=injected, rapl=None, cpu=FixedCpu()):
        pass
    assert fake.calls["nvmlShutdown"] == 1  # the caller owns what it injects
    TelemetrySampler(200.0, rapl=None, cpu=FixedCpu()).stop()  # never started: still released
    assert fake.calls["nvmlShutdown"] == 2


def test_thread_end_is_recorded_not_silent() -> None:
    calls = {"n": 0}

    def clock() -> float:
        calls["n"] += 1
        if calls["n"] > 4:
            raise OSError("clock broke")
        return time.monotonic()

    sampler = TelemetrySampler(200.0, nvml=None, rapl=None, cpu=FixedCpu(), clock=clock)
    sampler.start()
    wait_until(lambda: not sampler.running, WAIT_S, "the sampling thread ending on its own")
    sampler.stop()
    assert telemetry_threads() == []
    assert any("sampling thread ended: OSError: clock broke" in e for e in sampler.errors)
    assert "sampling thread ended" in sampler.summary()["telemetry_cpu_reason"]


def test_cpu_source_on_fake_psutil_through_sampler() -> None:
    root = FakeProcess(pid=1, created=0.0)
    ps, clock = FakePsutil(root, n_threads=2), FakeClock()
    sampler = TelemetrySampler(nvml=None, rapl=None, cpu=CpuSource(ps, pid=1, clock=clock), clock=clock)
    ps.run_cores([1.0, 0.0], 0.5)
    root.user += 0.5
    clock.advance(0.5)
    sampler.sample_now()
    assert {k: v for k, v in sampler.rows()[0].items() if k != "t"} == {
        "cpu_util": 0.5, "proc_util": 0.5, "proc_cores_busy": 1.0, "cpu_core0_util": 1.0, "cpu_core1_util": 0.0,
    }  # fmt: skip


@pytest.mark.e2e
def test_forgotten_stop_does_not_hang_interpreter_exit() -> None:
    code = "from rlbench.telemetry import TelemetrySampler\nTelemetrySampler(50.0, nvml=None, rapl=None).start()\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=20, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


def test_real_machine_without_gpu_reports_none_not_zero() -> None:
    if NvmlSource().available:
        pytest.skip("this machine has a working NVML GPU")
    with TelemetrySampler(100.0) as sampler:  # every source the real one
        wait_until(lambda: len(sampler.rows()) >= 3, WAIT_S, "two rows from the sampling thread")
    s = sampler.summary()
    assert s["energy_source_gpu"] == "none"
    assert s["energy_gpu_j"] is None and s["power_gpu_w_avg"] is None and s["gpu_util_avg"] is None
    assert s["telemetry_gpu_reason"].startswith(("nvmlInit failed", "pynvml not importable", "NVML found no GPU"))
    assert s["cpu_util_avg"] is not None and sampler.errors == []


@pytest.mark.gpu
def test_real_gpu_is_measured() -> None:
    if not NvmlSource().available:
        pytest.skip("no NVML GPU on this machine")
    with TelemetrySampler(20.0) as sampler:  # the GPU's counter (or its power readings) must add up to > 0 J
        wait_until(
            lambda: (sampler.summary()["energy_gpu_j"] or 0) > 0,
            30.0,
            lambda: f"GPU energy > 0 J; summary so far: {sampler.summary()}",
            poll_s=0.1,
        )
    s = sampler.summary()
    assert s["energy_source_gpu"] in {"nvml_counter", "nvml_power"}
    assert s["energy_gpu_j"] > 0 and s["power_gpu_w_avg"] > 0 and sampler.errors == []
