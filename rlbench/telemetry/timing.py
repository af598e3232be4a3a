"""Named operation timers, one per role (sample-factory's `timing.add_time`, RL-Scope's ops).

A role owns its OpTimer and is its only writer; the runner reads totals from another
thread (float reads under the GIL are atomic). `with timer.op("env_step"): ...` adds the
elapsed perf_counter time to that operation; `fractions(wall)` gives time shares.
`with timer.op("forward", device=True)` also brackets the block with CUDA events when the
role was given a CudaBusyTimer (rlbench.telemetry.gpu_busy).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class OpTimer:
    def __init__(self, role: str, gpu=None):
        self.role = role
        self.gpu = gpu  # CudaBusyTimer or None
        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.started = time.perf_counter()

    @contextmanager
    def op(self, name: str, device: bool = False) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            if device and self.gpu is not None:
                with self.gpu.span():
                    yield
            else:
                yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + 1

    def fractions(self, wall_s: float | None = None) -> dict[str, float]:
        """Share of the role's wall time spent in each operation."""
        wall = wall_s if wall_s is not None else time.perf_counter() - self.started
        return {k: v / wall for k, v in dict(self.totals).items()} if wall > 0 else {}
