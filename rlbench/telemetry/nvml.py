"""GPU telemetry through NVML (the `pynvml` module of nvidia-ml-py).

`NvmlSource` never raises into its caller for NVML trouble (what it does instead:
docs/metrics.md, "Telemetry, inside"); the pynvml module is injectable so every path is
testable without a GPU.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlbench.telemetry.energy import CounterAccumulator

MIB = 2**20

UNSUPPORTED_CODES = frozenset({"not_supported", "function_not_found", "no_permission"})
"""Errors that will not go away: the metric is remembered as unsupported."""

LOST_CODES = frozenset({"gpu_is_lost", "reset_required"})
"""Errors meaning the device is gone until a reset: stop sampling it."""

DEFAULT_LOST_AFTER = 3
"""Consecutive passes in which every NVML call failed before a device counts as lost."""


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU; None where unknown. Utilisations are fractions in [0, 1]."""

    index: int
    power_w: float | None = None
    energy_mj: int | None = None  # cumulative since this source's first counter reading
    util: float | None = None
    mem_util: float | None = None
    sm_clock_mhz: float | None = None
    mem_used_mb: float | None = None  # MiB (2**20 bytes)
    temp_c: float | None = None


@dataclass
class GpuDevice:
    """A device's identity and sampling state."""

    index: int
    handle: Any
    name: str | None = None
    gpu_cores: int | None = None  # nvmlDeviceGetNumGpuCores: CUDA cores, not SMs
    unsupported: dict[str, str] = field(default_factory=dict)  # metric -> error code
    lost_reason: str | None = None
    failed_passes: int = 0
    last_error: str | None = None
    energy: CounterAccumulator = field(default_factory=CounterAccumulator)

    @property
    def lost(self) -> bool:
        return self.lost_reason is not None


def _read_power(m: Any, h: Any) -> dict[str, Any]:
    return {"power_w": m.nvmlDeviceGetPowerUsage(h) / 1000.0}  # mW -> W


def _read_energy(m: Any, h: Any) -> dict[str, Any]:
    return {"energy_raw_mj": int(m.nvmlDeviceGetTotalEnergyConsumption(h))}  # Volta+


def _read_utilization(m: Any, h: Any) -> dict[str, Any]:
    rates = m.nvmlDeviceGetUtilizationRates(h)
    return {"util": rates.gpu / 100.0, "mem_util": rates.memory / 100.0}


def _read_sm_clock(m: Any, h: Any) -> dict[str, Any]:
    return {"sm_clock_mhz": float(m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_SM))}


def _read_memory(m: Any, h: Any) -> dict[str, Any]:
    return {"mem_used_mb": m.nvmlDeviceGetMemoryInfo(h).used / MIB}


def _read_temperature(m: Any, h: Any) -> dict[str, Any]:
    return {"temp_c": float(m.nvmlDeviceGetTemperature(h, m.NVML_TEMPERATURE_GPU))}


READERS: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
    "power": _read_power,
    "energy": _read_energy,
    "utilization": _read_utilization,
    "sm_clock": _read_sm_clock,
    "memory": _read_memory,
    "temperature": _read_temperature,
}


def error_codes(module: Any) -> dict[int, str]:
    """NVML_ERROR_* value -> short code ("not_supported", "gpu_is_lost", ...)."""
    codes: dict[int, str] = {}
    for name in dir(module):
        if name.startswith("NVML_ERROR_"):
            codes.setdefault(getattr(module, name), name[len("NVML_ERROR_") :].lower())
    return codes


def describe_error(err: BaseException) -> str:
    """The error's text, never raising (pynvml's __str__ may call into the library)."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001 - describing must not fail
        return type(err).__name__


def _decode(name: Any) -> str:
    return name.decode(errors="replace") if isinstance(name, bytes) else str(name)


class NvmlSource:
    """Samples every NVIDIA GPU through NVML; its failure policy: docs/metrics.md."""

    def __init__(self, pynvml_module: Any | None = None, lost_after: int = DEFAULT_LOST_AFTER) -> None:
        self.available = False
        self.reason: str | None = None
        self.reason_code: str | None = None
        self.devices: list[GpuDevice] = []
        self._lost_after = lost_after
        self._closed = False
        self._mod: Any = None
        self._codes: dict[int, str] = {}
        self._error_cls: type[BaseException] = Exception
        self._open(pynvml_module)

    # ---- start-up -------------------------------------------------------------------
    def _fail(self, code: str, reason: str) -> None:
        self.available, self.reason_code, self.reason = False, code, reason

    def _open(self, module: Any | None) -> None:
        if module is None:
            try:
                module = importlib.import_module("pynvml")
            except ImportError as e:
                self._fail("pynvml_not_importable", f"pynvml not importable: {e}")
                return
        self._mod, self._codes = module, error_codes(module)
        self._error_cls = getattr(module, "NVMLError", Exception)
        try:
            module.nvmlInit()
        except Exception as e:  # noqa: BLE001 - NVMLError or an OSError from the loader
            code = self.code(e)
            self._fail(code, f"nvmlInit failed: {code} ({describe_error(e)})")
            return
        self._discover()

    def _discover(self) -> None:
        try:
            count = int(self._mod.nvmlDeviceGetCount())
        except Exception as e:  # noqa: BLE001
            code = self.code(e)
            self._fail(code, f"nvmlDeviceGetCount failed: {code} ({describe_error(e)})")
            self._shutdown()
            return
        if count == 0:
            self._fail("no_devices", "NVML found no GPU")
            self._shutdown()
            return
        self.devices = [self._open_device(i) for i in range(count)]
        self.available = True

    def _open_device(self, index: int) -> GpuDevice:
        try:
            handle = self._mod.nvmlDeviceGetHandleByIndex(index)
        except Exception as e:  # noqa: BLE001
            reason = f"gpu{index} lost at start: {self.code(e)} ({describe_error(e)})"
            return GpuDevice(index, None, lost_reason=reason)
        dev = GpuDevice(index, handle)
        dev.name = self._optional(lambda: _decode(self._mod.nvmlDeviceGetName(handle)))
        dev.gpu_cores = self._optional(lambda: int(self._mod.nvmlDeviceGetNumGpuCores(handle)))
        return dev

    def _optional(self, read: Callable[[], Any]) -> Any:
        """A descriptive value that may be missing from the driver or the binding."""
        try:
            return read()
        except (AttributeError, self._error_cls):
            return None

    # ---- errors ---------------------------------------------------------------------
    def code(self, err: BaseException) -> str:
        """Short code of an NVML error ("not_supported"), else the exception's class name."""
        value = getattr(err, "value", None)
        if isinstance(value, int) and value in self._codes:
            return self._codes[value]
        return type(err).__name__

    # ---- sampling -------------------------------------------------------------------
    def sample(self) -> list[GpuSample]:
        """One reading per device (all-None for lost devices); [] when unavailable."""
        if not self.available or self._closed:
            return []
        return [self._sample_device(dev) for dev in self.devices]

    def _sample_device(self, dev: GpuDevice) -> GpuSample:
        fields: dict[str, Any] = {}
        attempted = failed = 0
        for metric, reader in READERS.items():
            if dev.lost:
                break
            if metric in dev.unsupported:
                continue
            attempted += 1
            failed += not self._read_metric(dev, metric, reader, fields)
        self._track_failures(dev, attempted, failed)
        return self._to_sample(dev, fields)

    def _read_metric(self, dev: GpuDevice, metric: str, reader: Callable, fields: dict) -> bool:
        """Read one metric into `fields`; False on a transient failure."""
        try:
            fields.update(reader(self._mod, dev.handle))
            return True
        except AttributeError as e:  # the binding lacks the function
            dev.unsupported[metric] = f"missing from pynvml ({e})"
            return True
        except self._error_cls as e:
            code = self.code(e)
            if code in LOST_CODES:
                dev.lost_reason = f"gpu{dev.index} lost: {code} ({describe_error(e)}) reading {metric}"
            elif code in UNSUPPORTED_CODES:
                dev.unsupported[metric] = code
                return True
            dev.last_error = f"{metric}: {code} ({describe_error(e)})"
            return False

    def _track_failures(self, dev: GpuDevice, attempted: int, failed: int) -> None:
        if dev.lost or attempted == 0 or failed < attempted:
            dev.failed_passes = 0
            return
        dev.failed_passes += 1
        if dev.failed_passes >= self._lost_after:
            dev.lost_reason = (
                f"gpu{dev.index} lost: every NVML call failed for {dev.failed_passes} "
                f"consecutive samples (last: {dev.last_error})"
            )

    @staticmethod
    def _to_sample(dev: GpuDevice, fields: dict[str, Any]) -> GpuSample:
        raw = fields.pop("energy_raw_mj", None)
        if raw is not None:
            dev.energy.update(raw, None)  # 64-bit mJ counter: a decrease is a reset, dropped
            fields["energy_mj"] = dev.energy.total
        return GpuSample(dev.index, **fields)

    # ---- state ----------------------------------------------------------------------
    @property
    def degraded_reason(self) -> str | None:
        """Why GPU telemetry is missing or partial; None when everything works."""
        if not self.available:
            return self.reason
        notes = [d.lost_reason for d in self.devices if d.lost_reason]
        for d in self.devices:
            if d.unsupported:
                listed = ", ".join(f"{m} ({c})" for m, c in sorted(d.unsupported.items()))
                notes.append(f"gpu{d.index} unsupported: {listed}")
        return "; ".join(notes) or None

    def close(self) -> None:
        """Release NVML (idempotent; errors ignored)."""
        if self.available and not self._closed:
            self._closed = True
            self._shutdown()

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):  # shutting down must not raise
            self._mod.nvmlShutdown()
