"""A CPU that says it has fast bf16 math: avx512_bf16 added to the flags rlbench.core.precision
reads, so that the tests of a precision sweep's record run on any host; a fake of the hardware,
as the GPU's are. Torch runs the bf16 math all the same, emulated where the CPU lacks it (slow,
and those jobs are tiny). The test patches it in and runs the sweep in its own process."""

from rlbench.core import precision

_real = precision.cpu_flags


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    return _real(path) | {"avx512_bf16"}
