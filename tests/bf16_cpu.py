"""`python -m tests.bf16_cpu ARGS`: `python -m rlbench ARGS` on a CPU that says it has fast bf16
math (avx512_bf16 added to the flags rlbench.core.precision reads), so that the tests of a
precision sweep's record run on any host; a fake of the hardware, as the GPU's are. Torch
runs the bf16 math all the same, emulated where the CPU lacks it (slow, and these jobs are
tiny). Its sweeps launch their jobs in this process (Hydra's basic launcher), so the jobs
see the same flags."""

import runpy
import sys

from rlbench.core import precision

_real = precision.cpu_flags


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    return _real(path) | {"avx512_bf16"}


if __name__ == "__main__":
    precision.cpu_flags = cpu_flags
    sys.argv[0] = "rlbench"
    runpy.run_module("rlbench", run_name="__main__", alter_sys=True)
