"""Test doubles: a fake `pynvml` module, a fake powercap sysfs tree, a fake psutil, a clock,
a fake `torch.cuda` with timed events.

FakeNvml mirrors the names of real nvidia-ml-py (NVMLError and its NVMLError_* subclasses,
NVML_ERROR_* values, nvml* functions, NVML_CLOCK_SM, NVML_TEMPERATURE_GPU);
test_nvml.py checks each name and value against the installed pynvml.
"""

from __future__ import annotations

import errno
import math
import string
from collections import Counter, namedtuple
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

MIB = 2**20

# Same values as pynvml 12/13 (checked in test_nvml.py::test_fake_mirrors_real_pynvml).
NVML_ERROR_VALUES = {
    "UNINITIALIZED": 1,
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "NOT_FOUND": 6,
    "DRIVER_NOT_LOADED": 9,
    "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13,
    "GPU_IS_LOST": 15,
    "RESET_REQUIRED": 16,
    "LIB_RM_VERSION_MISMATCH": 18,
    "UNKNOWN": 999,
}


class NVMLError(Exception):
    """Like pynvml.NVMLError: carries the NVML return code in `value`."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        names = {v: k for k, v in NVML_ERROR_VALUES.items()}
        return f"fake NVML error {names.get(self.value, self.value)}"


def error_class_name(code: str) -> str:
    """NVML_ERROR_<CODE> -> NVMLError_<Camel>, the way pynvml names its subclasses."""
    return "NVMLError_" + string.capwords(code, "_").replace("_", "")


def _make_error_classes() -> dict[str, type[NVMLError]]:
    classes = {}
    for code, value in NVML_ERROR_VALUES.items():

        def init(self: NVMLError, _v: int = value) -> None:
            NVMLError.__init__(self, _v)

        classes[code] = type(error_class_name(code), (NVMLError,), {"__init__": init})
    return classes


ERRORS = _make_error_classes()


def nvml_error(code: str) -> NVMLError:
    """An instance of the subclass for NVML_ERROR_<code>."""
    return ERRORS[code]()


@dataclass
class FakeGpu:
    """State and failure script of one fake device (it is also its own handle)."""

    power_mw: int = 100_000
    energy_mj: int = 1_000_000
    util_gpu: int = 50
    util_mem: int = 20
    sm_clock_mhz: int = 1500
    mem_used: int = 2048 * MIB
    temp_c: int = 60
    name: str | bytes = "Fake GPU"
    cores: int = 10752
    unsupported: set[str] = field(default_factory=set)  # nvml function names raising NotSupported
    lost_after: int | None = None  # metric calls before every call raises GpuIsLost
    fail_after: int | None = None  # metric calls before every call raises fail_code
    fail_code: str = "UNKNOWN"
    fail_once: set[str] = field(default_factory=set)  # functions raising fail_code on the next call
    calls: int = 0


class FakeNvml:
    """A pynvml stand-in; configure init failures, missing functions and per-device scripts."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVMLError = NVMLError

    def __init__(
        self,
        gpus: list[FakeGpu] | None = None,
        init_error: str | None = None,
        count_error: str | None = None,
        missing: set[str] | None = None,
    ) -> None:
        self._missing = set(missing or ())  # first: __getattribute__ reads it
        self.gpus = [FakeGpu()] if gpus is None else gpus
        self.init_error, self.count_error = init_error, count_error
        self.calls: Counter[str] = Counter()
        for code, value in NVML_ERROR_VALUES.items():
            setattr(self, f"NVML_ERROR_{code}", value)
            setattr(self, error_class_name(code), ERRORS[code])

    def __getattribute__(self, name: str) -> Any:
        if name in object.__getattribute__(self, "_missing"):
            raise AttributeError(f"module 'pynvml' has no attribute '{name}'")
        return object.__getattribute__(self, name)

    # ---- library --------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error:
            raise nvml_error(self.init_error)

    def nvmlShutdown(self) -> None:
        self.calls["nvmlShutdown"] += 1

    def nvmlDeviceGetCount(self) -> int:
        if self.count_error:
            raise nvml_error(self.count_error)
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetName(self, handle: FakeGpu) -> str | bytes:
        return handle.name

    def nvmlDeviceGetNumGpuCores(self, handle: FakeGpu) -> int:
        return handle.cores

    # ---- metrics --------------------------------------------------------------------
    def _metric(self, fn: str, gpu: FakeGpu) -> None:
        """Count the call and raise what the device's script says."""
        self.calls[fn] += 1
        gpu.calls += 1
        if gpu.lost_after is not None and gpu.calls > gpu.lost_after:
            raise nvml_error("GPU_IS_LOST")
        if gpu.fail_after is not None and gpu.calls > gpu.fail_after:
            raise nvml_error(gpu.fail_code)
        if fn in gpu.fail_once:
            gpu.fail_once.discard(fn)
            raise nvml_error(gpu.fail_code)
        if fn in gpu.unsupported:
            raise nvml_error("NOT_SUPPORTED")

    def nvmlDeviceGetPowerUsage(self, handle: FakeGpu) -> int:
        self._metric("nvmlDeviceGetPowerUsage", handle)
        return handle.power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeGpu) -> int:
        self._metric("nvmlDeviceGetTotalEnergyConsumption", handle)
        return handle.energy_mj

    def nvmlDeviceGetUtilizationRates(self, handle: FakeGpu) -> SimpleNamespace:
        self._metric("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=handle.util_gpu, memory=handle.util_mem)

    def nvmlDeviceGetClockInfo(self, handle: FakeGpu, clock_type: int) -> int:
        self._metric("nvmlDeviceGetClockInfo", handle)
        assert clock_type == self.NVML_CLOCK_SM
        return handle.sm_clock_mhz

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu) -> SimpleNamespace:
        self._metric("nvmlDeviceGetMemoryInfo", handle)
        total = 80 * 1024 * MIB
        return SimpleNamespace(total=total, free=total - handle.mem_used, used=handle.mem_used)

    def nvmlDeviceGetTemperature(self, handle: FakeGpu, sensor: int) -> int:
        self._metric("nvmlDeviceGetTemperature", handle)
        assert sensor == self.NVML_TEMPERATURE_GPU
        return handle.temp_c


# ---- powercap sysfs ----------------------------------------------------------------------
class FakePowercap:
    """Builds a /sys/class/powercap-like tree; `read` is the reader to inject into RaplSource.

    Since tests run as root, file permissions cannot deny reads: `deny(path)` makes `read`
    raise PermissionError for that path, `break_file(path)` an EIO OSError.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "intel-rapl").mkdir(exist_ok=True)  # the control-type dir real sysfs has
        self.denied: set[Path] = set()
        self.broken: set[Path] = set()

    def _zone(self, path: Path, name: str, energy_uj: int, max_range_uj: int | None) -> Path:
        path.mkdir(parents=True)
        (path / "name").write_text(name + "\n")
        (path / "energy_uj").write_text(f"{energy_uj}\n")
        if max_range_uj is not None:
            (path / "max_energy_range_uj").write_text(f"{max_range_uj}\n")
        return path

    def add_package(
        self,
        n: int,
        energy_uj: int = 0,
        max_range_uj: int | None = 262_143_328_850,
        dram: tuple[int, int | None] | None = None,
    ) -> Path:
        """intel-rapl:n (package-n) with a core subzone and, if given, a dram subzone."""
        top = self._zone(self.root / f"intel-rapl:{n}", f"package-{n}", energy_uj, max_range_uj)
        self._zone(top / f"intel-rapl:{n}:0", "core", 0, max_range_uj)
        (self.root / f"intel-rapl:{n}:0").symlink_to(top / f"intel-rapl:{n}:0")  # as in sysfs
        if dram is not None:
            self._zone(top / f"intel-rapl:{n}:1", "dram", *dram)
        return top

    def dram(self, n: int) -> Path:
        return self.root / f"intel-rapl:{n}" / f"intel-rapl:{n}:1"

    def set_energy(self, zone: Path, energy_uj: int) -> None:
        (zone / "energy_uj").write_text(f"{energy_uj}\n")

    def deny(self, path: Path) -> None:
        self.denied.add(path)

    def break_file(self, path: Path) -> None:
        self.broken.add(path)

    def read(self, path: Path) -> str:
        if path in self.denied:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        if path in self.broken:
            raise OSError(errno.EIO, "Input/output error", str(path))
        return path.read_text()


# ---- psutil and clock ----------------------------------------------------------------------
class FakePsutilError(Exception):
    pass


class FakeNoSuchProcess(FakePsutilError):
    pass


@dataclass
class FakeProcess:
    pid: int
    created: float
    user: float = 0.0
    system: float = 0.0
    kids: list[FakeProcess] = field(default_factory=list)
    gone: bool = False

    def cpu_times(self) -> SimpleNamespace:
        if self.gone:
            raise FakeNoSuchProcess(self.pid)
        return SimpleNamespace(user=self.user, system=self.system)

    def create_time(self) -> float:
        return self.created

    def children(self, recursive: bool = False) -> list[FakeProcess]:
        assert recursive
        out = []
        for k in self.kids:
            out += [k, *k.children(recursive=True)]
        return out

    @contextmanager
    def oneshot(self) -> Iterator[None]:
        yield


SCPUTIMES = namedtuple("scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")


class FakePsutil:
    """psutil stand-in: one process tree and a script of per-core percentages."""

    Error = FakePsutilError
    NoSuchProcess = FakeNoSuchProcess

    def __init__(self, root: FakeProcess, n_threads: int | None = 4) -> None:
        self.root, self.n_threads = root, n_threads
        self.cores = [SCPUTIMES(*[0.0] * len(SCPUTIMES._fields)) for _ in range(n_threads or 1)]

    def run_cores(self, busy: list[float], seconds: float, guest: float = 0.0) -> None:
        """Each core busy for its fraction of `seconds` (user time, `guest` of it also counted
        as guest, as Linux does), idle the rest."""
        self.cores = [
            c._replace(user=c.user + b * seconds, guest=c.guest + guest * b * seconds, idle=c.idle + (1 - b) * seconds)
            for c, b in zip(self.cores, busy, strict=True)
        ]

    def Process(self, pid: int) -> FakeProcess:
        return self.root

    def cpu_count(self, logical: bool = True) -> int | None:
        return self.n_threads

    def cpu_times(self, percpu: bool = False) -> list:
        assert percpu
        return list(self.cores)


class FakeClock:
    """A monotonic clock moved by hand."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


# ---- torch.cuda events ---------------------------------------------------------------------
class FakeCudaEvent:
    """torch.cuda.Event stand-in: takes the timeline's `now` (ms) when recorded."""

    def __init__(self, cuda: FakeCuda, enable_timing: bool = False) -> None:
        assert enable_timing
        self.cuda, self.t = cuda, None

    def record(self) -> None:
        assert self.cuda.now >= self.cuda.last_ms, "one stream: timestamps grow in record order"
        self.t = self.cuda.last_ms = self.cuda.now

    def query(self) -> bool:
        return self.t is not None and self.t <= self.cuda.done_ms

    def synchronize(self) -> None:
        if self.t is not None:
            self.cuda.done_ms = max(self.cuda.done_ms, self.t)

    def elapsed_time(self, end: FakeCudaEvent) -> float:
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready")  # as torch, for incomplete events
        return end.t - self.t


class FakeCuda:
    """torch.cuda stand-in with one stream. Events recorded now carry `now` (ms; tests keep it
    non-decreasing); those up to `done_ms` are complete (the device's progress)."""

    def __init__(self, done_ms: float = math.inf) -> None:
        self.now, self.last_ms, self.done_ms = 0.0, -math.inf, done_ms

    def Event(self, enable_timing: bool = False) -> FakeCudaEvent:
        return FakeCudaEvent(self, enable_timing)
