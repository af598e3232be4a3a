"""True GPU-busy time from CUDA events, beside NVML's utilisation.

NVML's "utilisation" is the share of sample periods in which any kernel ran, which the
study (and RL-Scope) show overstates how busy the GPU really is. Here every span of device
work (inference forward, learner forward/backward and optimizer step) is bracketed by two
CUDA events on the current stream; `busy_s()` sums the elapsed time of finished spans, and
`gpu_busy_frac = busy_s / wall`. Spans on one stream do not overlap, so the sum is not
double counted; a span also contains any idle gaps between its own kernels, so the figure
is an upper bound of kernel time within those spans.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator


class CudaBusyTimer:
    def __init__(self, device, cuda=None):
        """`cuda` defaults to torch.cuda; tests pass a fake with Event(enable_timing=True)."""
        if cuda is None:
            import torch

            cuda = torch.cuda
        self._cuda, self.device = cuda, device
        self._pending: list = []
        self._busy_ms = 0.0
        self._lock = threading.Lock()

    @contextmanager
    def span(self) -> Iterator[None]:
        start = self._cuda.Event(enable_timing=True)
        end = self._cuda.Event(enable_timing=True)
        start.record()
        try:
            yield
        finally:
            end.record()
            with self._lock:
                self._pending.append((start, end))

    def busy_s(self, wait: bool = False) -> float:
        """Seconds of finished spans; with wait=True, synchronises on every pending span."""
        with self._lock:
            still = []
            for start, end in self._pending:
                if wait:
                    end.synchronize()
                if end.query():
                    self._busy_ms += start.elapsed_time(end)
                else:
                    still.append((start, end))
            self._pending = still
            return self._busy_ms / 1e3


def make_busy_timer(device) -> tuple[CudaBusyTimer | None, str | None]:
    """A timer on CUDA devices; otherwise None and the reason gpu_busy_frac is null."""
    if getattr(device, "type", str(device)) != "cuda":
        return None, f"no CUDA device (learner and inference on {device})"
    return CudaBusyTimer(device), None
