"""NvmlSource against the fake pynvml (and the real one's error classes and names)."""

from __future__ import annotations

import sys

import pynvml
import pytest

from rlbench.telemetry.nvml import GpuSample, NvmlSource

from .fakes import ERRORS, MIB, NVML_ERROR_VALUES, FakeGpu, FakeNvml, error_class_name, nvml_error

METRIC_FUNCTIONS = [
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetTemperature",
]


def test_fake_mirrors_real_pynvml() -> None:
    for code, value in NVML_ERROR_VALUES.items():
        assert getattr(pynvml, f"NVML_ERROR_{code}") == value
        real_cls = getattr(pynvml, error_class_name(code))
        assert issubclass(real_cls, pynvml.NVMLError)
        assert real_cls().value == value == ERRORS[code]().value
    for name in [*METRIC_FUNCTIONS, "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount",
                 "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetName", "nvmlDeviceGetNumGpuCores"]:  # fmt: skip
        assert callable(getattr(pynvml, name)) and callable(getattr(FakeNvml(), name))
    assert pynvml.NVML_CLOCK_SM == FakeNvml.NVML_CLOCK_SM
    assert pynvml.NVML_TEMPERATURE_GPU == FakeNvml.NVML_TEMPERATURE_GPU


def test_healthy_device_reads_every_metric() -> None:
    gpu = FakeGpu(power_mw=123_456, energy_mj=5_000, util_gpu=75, util_mem=30, mem_used=512 * MIB)
    src = NvmlSource(FakeNvml([gpu]))
    assert src.available and src.reason is None and src.degraded_reason is None
    assert (src.devices[0].name, src.devices[0].gpu_cores) == ("Fake GPU", 10752)
    first = src.sample()[0]
    assert first == GpuSample(0, 123.456, 0, 0.75, 0.30, 1500.0, 512.0, 60.0)
    gpu.energy_mj += 2_500
    assert src.sample()[0].energy_mj == 2_500  # cumulative since the first reading


def test_bytes_name_and_missing_core_count_are_tolerated() -> None:
    fake = FakeNvml([FakeGpu(name=b"Old GPU")], missing={"nvmlDeviceGetNumGpuCores"})
    src = NvmlSource(fake)
    assert src.available
    assert (src.devices[0].name, src.devices[0].gpu_cores) == ("Old GPU", None)


def test_not_supported_power_leaves_other_metrics_and_is_not_retried() -> None:
    fake = FakeNvml([FakeGpu(unsupported={"nvmlDeviceGetPowerUsage"})])
    src = NvmlSource(fake)
    samples = [src.sample()[0] for _ in range(3)]
    assert all(s.power_w is None for s in samples)
    assert all(s.util == 0.5 and s.temp_c == 60.0 and s.energy_mj is not None for s in samples)
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1
    assert fake.calls["nvmlDeviceGetTemperature"] == 3
    assert src.devices[0].unsupported == {"power": "not_supported"}
    assert "gpu0 unsupported: power (not_supported)" in src.degraded_reason


def test_function_missing_from_binding_counts_as_unsupported() -> None:
    fake = FakeNvml(missing={"nvmlDeviceGetTotalEnergyConsumption"})
    src = NvmlSource(fake)
    s = src.sample()[0]
    assert s.energy_mj is None and s.power_w == 100.0
    assert "energy" in src.devices[0].unsupported and not src.devices[0].lost


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("LIBRARY_NOT_FOUND", "library_not_found"),
        ("DRIVER_NOT_LOADED", "driver_not_loaded"),
        ("LIB_RM_VERSION_MISMATCH", "lib_rm_version_mismatch"),
        ("UNKNOWN", "unknown"),
    ],
)
def test_init_failure_reports_unavailable(code: str, expected: str) -> None:
    src = NvmlSource(FakeNvml(init_error=code))
    assert not src.available
    assert src.reason_code == expected
    assert src.reason.startswith(f"nvmlInit failed: {expected}")
    assert src.sample() == [] and src.degraded_reason == src.reason


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "lib_rm_version_mismatch"),
    ],
)
def test_init_failure_with_real_pynvml_errors(monkeypatch: pytest.MonkeyPatch, value: int, expected: str) -> None:
    def fail() -> None:
        raise pynvml.NVMLError(value)  # pynvml maps the value to its NVMLError_* subclass

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    src = NvmlSource(pynvml)
    assert (src.available, src.reason_code) == (False, expected)


def test_pynvml_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    src = NvmlSource()
    assert (src.available, src.reason_code) == (False, "pynvml_not_importable")
    assert "pynvml not importable" in src.reason


def test_no_devices_and_count_failure() -> None:
    fake = FakeNvml(gpus=[])
    src = NvmlSource(fake)
    assert (src.available, src.reason_code) == (False, "no_devices")
    assert fake.calls["nvmlShutdown"] == 1
    src = NvmlSource(FakeNvml(count_error="UNKNOWN"))
    assert (src.available, src.reason_code) == (False, "unknown")


def test_gpu_lost_mid_run_degrades_without_raising() -> None:
    gpu = FakeGpu(lost_after=len(METRIC_FUNCTIONS) * 2 + 1)  # 2 full passes, then 1 good call
    fake = FakeNvml([gpu])
    src = NvmlSource(fake)
    assert src.sample()[0].power_w == 100.0
    assert src.sample()[0].power_w == 100.0
    third = src.sample()[0]
    assert third.power_w == 100.0 and third.energy_mj is None  # read before the loss
    assert src.devices[0].lost
    assert "gpu0 lost: gpu_is_lost" in src.degraded_reason
    calls = gpu.calls
    assert src.sample() == [GpuSample(0)]  # all None, no NVML call, no exception
    assert gpu.calls == calls


def test_unknown_on_every_call_marks_lost_after_consecutive_passes() -> None:
    gpu = FakeGpu(fail_after=0)  # every metric call raises NVML_ERROR_UNKNOWN
    src = NvmlSource(FakeNvml([gpu]), lost_after=3)
    for _ in range(2):
        assert src.sample() == [GpuSample(0)]
        assert not src.devices[0].lost
    src.sample()
    assert src.devices[0].lost
    assert "every NVML call failed for 3 consecutive samples" in src.degraded_reason


def test_transient_error_is_retried() -> None:
    gpu = FakeGpu(fail_once={"nvmlDeviceGetPowerUsage"})
    src = NvmlSource(FakeNvml([gpu]))
    assert src.sample()[0].power_w is None
    assert src.sample()[0].power_w == 100.0
    assert not src.devices[0].unsupported and src.degraded_reason is None
    assert src.devices[0].last_error.startswith("power: unknown")


def test_one_lost_gpu_does_not_stop_the_others() -> None:
    fake = FakeNvml([FakeGpu(lost_after=0), FakeGpu(power_mw=50_000)])
    src = NvmlSource(fake)
    for _ in range(3):
        lost, alive = src.sample()
    assert lost == GpuSample(0) and alive.power_w == 50.0
    assert src.devices[0].lost and not src.devices[1].lost


def test_handle_failure_at_start_marks_that_device_lost() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    real_handle = fake.nvmlDeviceGetHandleByIndex

    def handle(i: int) -> FakeGpu:
        if i == 1:
            raise nvml_error("GPU_IS_LOST")
        return real_handle(i)

    fake.nvmlDeviceGetHandleByIndex = handle
    src = NvmlSource(fake)
    assert src.available and src.devices[1].lost and not src.devices[0].lost
    assert "gpu1 lost at start: gpu_is_lost" in src.degraded_reason


def test_counter_reset_is_dropped_not_negative() -> None:
    gpu = FakeGpu(energy_mj=10_000)
    src = NvmlSource(FakeNvml([gpu]))
    src.sample()
    gpu.energy_mj = 12_000
    assert src.sample()[0].energy_mj == 2_000
    gpu.energy_mj = 100  # driver reload reset the counter
    assert src.sample()[0].energy_mj == 2_000
    gpu.energy_mj = 400
    assert src.sample()[0].energy_mj == 2_300
    assert src.devices[0].energy.dropped == 1


def test_close_shuts_down_once_and_stops_sampling() -> None:
    fake = FakeNvml()
    src = NvmlSource(fake)
    src.close()
    src.close()
    assert fake.calls["nvmlShutdown"] == 1
    assert src.sample() == []
