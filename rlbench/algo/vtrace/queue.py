"""The bounded FIFO of whole unrolls between central inference and V-trace's learner.

No replay: every unroll is trained on once, in arrival order; the learner takes exactly
`batch_size`. The actors keep the bound, waiting (op `rate_limited`) while it is full, so a
slow learner shows as their waiting. docs/vtrace.md, "buffer".
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from rlbench.algo.common.unrolls import Sequences, pop_rows


class UnrollQueue:
    def __init__(self, capacity: int, keep: bool = True):
        self.capacity, self.keep = capacity, keep  # keep=False (no learner): count the unrolls, drop them
        self._chunks: collections.deque = collections.deque()  # (Sequences, per-row version), oldest first
        self.size = 0  # unrolls queued
        self.put_total = 0  # unrolls ever put
        self._lock = threading.Lock()
        self.on_put = lambda: None  # called after each put (the learner sets its wakeup's ring)

    def full(self) -> bool:
        return self.size >= self.capacity

    def put(self, seqs: Sequences, version: int) -> None:
        if not self.keep:
            self.put_total += len(seqs)
            return
        owned = seqs.owned()  # the assembler's rows are views of its rings
        with self._lock:
            self._chunks.append((owned, np.full(len(owned), version)))
            self.size += len(owned)
            self.put_total += len(owned)
        self.on_put()

    def take(self, n: int) -> tuple[Sequences, np.ndarray]:
        """The oldest n unrolls (batch-major) and the policy version each was acted with."""
        with self._lock:
            if self.size < n:
                raise RuntimeError(f"take({n}) from a queue of {self.size} unrolls")
            rows = pop_rows(self._chunks, n)
            self.size -= n
        return rows
