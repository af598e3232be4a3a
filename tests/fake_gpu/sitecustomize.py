"""The GPU fakes of the GPU study's rehearsal (tests/test_gpu_study.py), for every Python process
of the run: with tests/fake_gpu and the clone on PYTHONPATH, Python imports this module at its
start, so the script and the sweeps it starts read NVML from tests/telemetry/fakes.py's FakeNvml
(one GPU drawing 100 W: its energy counter grows with the clock) and see a CPU with fast bf16
math (as tests/bf16_cpu.py does)."""

import sys
import time

from rlbench.core import precision
from tests.telemetry.fakes import FakeGpu, FakeNvml

WATTS = 100.0
_start = time.monotonic()
_real_flags = precision.cpu_flags


class DrawingNvml(FakeNvml):
    """FakeNvml whose GPU draws WATTS: its energy counter is WATTS x the seconds since the start."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeGpu) -> int:
        handle.energy_mj = int(1e6 + 1e3 * WATTS * (time.monotonic() - _start))
        return super().nvmlDeviceGetTotalEnergyConsumption(handle)


def _cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    return _real_flags(path) | {"avx512_bf16"}


sys.modules["pynvml"] = DrawingNvml([FakeGpu(name="Fake H100", power_mw=int(1e3 * WATTS))])
precision.cpu_flags = _cpu_flags
