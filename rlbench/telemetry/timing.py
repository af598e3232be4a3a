"""Named operation timers, one per role (sample-factory's `timing.add_time`, RL-Scope's ops).

`with timer.op("env_step"): ...` adds the elapsed perf_counter time to that operation
(`device=True` also brackets it with CUDA events); `fractions(wall)` gives time shares,
`snapshot(now)` the totals with an open operation counted up to `now`. docs/metrics.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class OpTimer:
    def __init__(self, role: str, gpu=None, spans=None):
        self.role = role
        self.gpu = gpu  # CudaBusyTimer or None
        self.spans = spans  # a SpanRecorder while the job records its timeline
        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.open: tuple[str, float] | None = None  # (op, start) of the outermost op in progress
        self.started = time.perf_counter()

    @contextmanager
    def op(self, name: str, device: bool = False) -> Iterator[None]:
        t0 = time.perf_counter()
        outer = self.open is None
        if outer:
            self.open = (name, t0)
        try:
            if device and self.gpu is not None:
                with self.gpu.span():
                    yield
            else:
                yield
        finally:
            t1 = time.perf_counter()
            if outer:
                self.open = None
            self.add(name, t1 - t0)
            if self.spans is not None:
                self.spans.add(name, t0, t1)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds
        self.counts[name] = self.counts.get(name, 0) + 1

    def snapshot(self, now: float) -> dict[str, float]:
        """Totals as of `now` (perf_counter), the open operation counted up to `now`."""
        totals, current = dict(self.totals), self.open
        if current is not None and now > current[1]:
            totals[current[0]] = totals.get(current[0], 0.0) + now - current[1]
        return totals

    def fractions(self, wall_s: float | None = None) -> dict[str, float]:
        """Share of the role's wall time spent in each operation."""
        wall = wall_s if wall_s is not None else time.perf_counter() - self.started
        return {k: v / wall for k, v in dict(self.totals).items()} if wall > 0 else {}
