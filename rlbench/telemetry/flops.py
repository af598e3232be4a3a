"""Achieved model FLOP/s of a role's calls (the learner's updates, central inference's forwards).

torch's FlopCounterMode counts the FLOPs per item on the first call that does work; that call
is left out of the rate: `tflops()` = FLOPs per item x the items of the later calls / their
seconds. docs/precision.md, "FLOP/s and MFU".
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Call:
    items: int = 0  # work the call did (updates made, envs forwarded); 0: it did none


class FlopRate:
    def __init__(self):
        self.flops_per_item: float | None = None  # None until a call that did work was counted
        self.items = 0  # items of the timed calls (after the counted one)
        self.seconds = 0.0

    @contextmanager
    def call(self, items: int = 1):
        """Around one call; set `.items` on the yielded Call where the work is known only after it."""
        c = Call(items)
        if self.flops_per_item is None:
            from torch.utils.flop_counter import FlopCounterMode  # lazy: keeps torch off the start

            with FlopCounterMode(display=False) as counter:
                yield c
            if c.items:
                self.flops_per_item = counter.get_total_flops() / c.items
            return
        t0 = time.perf_counter()
        yield c
        if c.items:
            self.seconds += time.perf_counter() - t0
            self.items += c.items

    def tflops(self) -> float | None:
        """Achieved TFLOP/s of the timed calls; None before one was timed."""
        if self.flops_per_item is None or self.seconds <= 0:
            return None
        return self.flops_per_item * self.items / self.seconds / 1e12

    def why_null(self, what: str) -> str:
        if self.flops_per_item is None:
            return f"no {what} did work, so none was counted"
        return f"only the first {what} (counted by FlopCounterMode, so left out of the rate) did work"
