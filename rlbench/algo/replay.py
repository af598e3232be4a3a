"""Prioritized sequence replay (R2D2): bounded FIFO storage, proportional sampling.

The replay role owns its lock: inference inserts, the learner samples and updates
priorities, each under the lock. Sampling is proportional to priority^alpha; a priority
update for a slot that was overwritten since it was sampled is ignored (slot generations).
"""

from __future__ import annotations

import threading

import numpy as np

from rlbench.algo.r2d2_math import importance_weights
from rlbench.algo.unrolls import Sequences

_FIELDS = ("obs", "action", "prev_action", "reward", "done", "q", "state")


class SequenceReplay:
    def __init__(self, capacity: int, example: Sequences, alpha: float, beta: float, seed: int,
                 prefault: bool = False):
        self.capacity, self.alpha, self.beta = capacity, alpha, beta
        self._store = {
            f: np.zeros((capacity, *getattr(example, f).shape[1:]), getattr(example, f).dtype)
            for f in _FIELDS
        }
        if prefault:  # touch every page now, not on the actors' path (first touch is ~40x slower)
            for a in self._store.values():
                a.fill(0)
        self._priority = np.zeros(capacity, dtype=np.float64)  # already ^alpha
        self._generation = np.zeros(capacity, dtype=np.int64)
        self._next = 0
        self.size = 0
        self.inserted = 0  # sequences ever inserted
        self.sampled = 0  # sequences ever sampled
        self._rng = np.random.default_rng(seed)
        self.lock = threading.Lock()

    @classmethod
    def for_shapes(cls, capacity, length, obs_shape, obs_dtype, num_actions, state_size, **kw):
        example = Sequences(
            obs=np.zeros((1, length, *obs_shape), obs_dtype),
            action=np.zeros((1, length), np.int64),
            prev_action=np.zeros((1, length), np.int64),
            reward=np.zeros((1, length), np.float32),
            done=np.zeros((1, length), bool),
            q=np.zeros((1, length, num_actions), np.float32),
            state=np.zeros((1, 2, state_size), np.float32),
        )
        return cls(capacity, example, **kw)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._store.values())

    def insert(self, seqs: Sequences, priorities: np.ndarray) -> None:
        k = len(seqs)
        with self.lock:
            slots = (self._next + np.arange(k)) % self.capacity
            for f in _FIELDS:
                self._copy_in(f, slots, getattr(seqs, f))
            self._priority[slots] = np.maximum(priorities, 1e-6) ** self.alpha
            self._generation[slots] += 1
            self._next = int((self._next + k) % self.capacity)
            self.size = min(self.size + k, self.capacity)
            self.inserted += k

    def _copy_in(self, field: str, slots: np.ndarray, values) -> None:
        if isinstance(values, list):  # rows of views (pieces in time order): copy straight in
            for slot, pieces in zip(slots, values):
                t = 0
                for piece in pieces:
                    self._store[field][slot, t : t + len(piece)] = piece
                    t += len(piece)
        else:
            self._store[field][slots] = values

    def sample(self, batch_size: int):
        """Returns (slots, generations, Sequences, importance weights [B])."""
        with self.lock:
            if self.size == 0:
                raise RuntimeError("sample() on an empty replay")
            p = self._priority[: self.size]
            probs = p / p.sum()
            slots = self._rng.choice(self.size, size=batch_size, p=probs)
            batch = Sequences(**{f: self._store[f][slots] for f in _FIELDS})
            weights = importance_weights(probs[slots], self.size, self.beta)
            self.sampled += batch_size
            return slots, self._generation[slots].copy(), batch, weights

    def update_priorities(self, slots, generations, priorities) -> None:
        with self.lock:
            live = self._generation[slots] == generations
            self._priority[slots[live]] = np.maximum(priorities[live], 1e-6) ** self.alpha
