"""SEED RL's unroll queue between central inference and R2D2's replay (coupling=unroll_queue).

Inference puts every completed unroll into a bounded FIFO and blocks while it is full; before
each update the learner takes an insertion batch into replay; a closed queue drops and counts
later puts. docs/r2d2.md, "coupling" and "The unroll queue, inside".
"""

from __future__ import annotations

import collections
import contextlib
import threading

import numpy as np

from rlbench.algo.common.unrolls import Sequences, pop_rows


class UnrollQueue:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self._chunks: collections.deque = collections.deque()  # (Sequences, priorities), oldest first
        self.size = 0  # unrolls queued
        self.put_total = 0  # unrolls ever offered (queued or dropped)
        self.dropped = 0  # unrolls offered after the queue closed
        self.closed = False
        self._cond = threading.Condition()
        self.on_put = lambda: None  # called as rows come in (the learner sets its wakeup's ring)

    def put(self, seqs: Sequences, priorities: np.ndarray, blocked=contextlib.nullcontext) -> None:
        """Queue owned rows `seqs` in order, waiting for room as it appears (inside `blocked()`)."""
        n, i = len(seqs), 0
        with self._cond:
            self.put_total += n
            while i < n:
                if self.closed:
                    self.dropped += n - i
                    return
                room = self.capacity - self.size
                if room <= 0:
                    with blocked():
                        while self.size >= self.capacity and not self.closed:
                            self._cond.wait()
                    continue
                k = min(room, n - i)
                part = seqs if k == n else seqs.rows(slice(i, i + k))
                self._chunks.append((part, priorities[i : i + k]))
                self.size += k
                i += k
                self.on_put()  # before a wait for room: the learner takes from a full queue

    def take(self, n: int) -> tuple[Sequences | None, np.ndarray]:
        """The oldest min(n, size) unrolls and their priorities (never waits: see `size`)."""
        with self._cond:
            n = min(n, self.size)
            rows = pop_rows(self._chunks, n)
            self.size -= n
            self._cond.notify_all()
        return rows

    def close(self) -> None:
        """No learner will take more: wake a blocked put, and drop what is offered from now on."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
