"""True GPU-busy time from CUDA events, beside NVML's utilisation (which overstates it).

`CudaBusyTimer` brackets every span of device work with two CUDA events; `busy_s()` is the
length of the union of all threads' spans (`IntervalUnion`), and `gpu_busy_frac = busy_s /
wall`. Why the union is exact with spans finishing out of order: docs/metrics.md, "Telemetry, inside".
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


class IntervalUnion:
    """Length of the union of intervals, swept in increasing order of start.

    `extend` sorts a batch by start; every later batch must start at or after the latest
    start already added, otherwise the union would be undercounted.
    """

    def __init__(self) -> None:
        self.total = 0.0
        self.covered_until = -math.inf  # the sweep frontier: all before it is counted

    def add(self, start: float, end: float) -> None:
        """Adds the part of [start, end] beyond the frontier (starts must not decrease)."""
        if end <= self.covered_until:
            return
        self.total += end - max(start, self.covered_until)
        self.covered_until = end

    def extend(self, intervals: Iterable[tuple[float, float]]) -> None:
        for start, end in sorted(intervals):
            self.add(start, end)


@dataclass
class _Span:
    start: Any  # CUDA event, recorded
    end: Any = None  # CUDA event, set once recorded

    def finished(self) -> bool:
        return self.end is not None and self.end.query()


class CudaBusyTimer:
    def __init__(self, device, cuda=None):
        """`cuda` defaults to torch.cuda; tests pass a fake with Event(enable_timing=True)."""
        if cuda is None:
            import torch  # lazy: keeps torch off the start

            cuda = torch.cuda
        self._cuda, self.device = cuda, device
        self._ref = None  # the first span's start event: time zero of every span
        self._pending: list[_Span] = []  # started and not counted yet
        self._union = IntervalUnion()
        self._lock = threading.Lock()
        self.spans = None  # a SpanRecorder for the job's timeline (rlbench.telemetry.trace), or None
        self._ref_host = None  # perf_counter when the first span's start was recorded

    @contextmanager
    def span(self) -> Iterator[None]:
        span = _Span(self._cuda.Event(enable_timing=True))
        end = self._cuda.Event(enable_timing=True)
        with self._lock:  # recorded and registered at once: busy_s sees every started span
            span.start.record()
            if self._ref is None:
                self._ref, self._ref_host = span.start, time.perf_counter()
            self._pending.append(span)
        try:
            yield
        finally:
            end.record()
            with self._lock:
                span.end = end

    def busy_s(self, wait: bool = False) -> float:
        """Seconds covered by counted spans; with wait=True, synchronises on every ended span."""
        with self._lock:
            if wait:
                for span in self._pending:
                    if span.end is not None:
                        span.end.synchronize()
            self._count_ready()
            return self._union.total / 1e3

    def _count_ready(self) -> None:
        """Counts the finished spans that start before every unfinished one; keeps the rest."""
        finished, unfinished = [], []
        for span in self._pending:  # one query per span: the device runs on meanwhile
            (finished if span.finished() else unfinished).append(span)
        # an unfinished span whose start is not complete starts after every complete event
        bound = min((self._ms(s.start) for s in unfinished if s.start.query()), default=math.inf)
        timed = [(self._ms(s.start), self._ms(s.end), s) for s in finished]
        counted = sorted((start, end) for start, end, _ in timed if start < bound)
        self._union.extend(counted)
        if self.spans is not None:  # on the host's clock, aligned at the first span's start (an estimate:
            for start, end in counted:  # the device runs behind the host by its launch queue)
                self.spans.add("gpu busy", self._ref_host + start / 1e3, self._ref_host + end / 1e3)
        self._pending = unfinished + [s for start, _, s in timed if start >= bound]

    def _ms(self, event) -> float:
        return self._ref.elapsed_time(event)


def make_busy_timer(device) -> tuple[CudaBusyTimer | None, str | None]:
    """A timer on CUDA devices; otherwise None and the reason gpu_busy_frac is null."""
    if getattr(device, "type", str(device)) != "cuda":
        return None, f"no CUDA device (learner and inference on {device})"
    return CudaBusyTimer(device), None
