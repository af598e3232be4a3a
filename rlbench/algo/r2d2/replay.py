"""Prioritized sequence replay (R2D2): bounded FIFO storage, proportional sampling.

The replay owns its lock and holds it only for bookkeeping and an insert: the learner copies
sampled rows outside it and drops those an insert overwrote meanwhile (slot generations); a job's
storage serves the next job of its shapes, zeroed (`release`). docs/r2d2.md, "replay".
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from rlbench.algo.common.frames import frame_shape
from rlbench.algo.common.pages import small_pages
from rlbench.algo.common.unrolls import FIELDS, Sequences
from rlbench.algo.r2d2.sequences import importance_weights

_KEPT: list[tuple[tuple, dict]] = []  # at most one (shapes, storage) a finished job released
_KEPT_LOCK = threading.Lock()


def _zero_all(arrays: list[np.ndarray]) -> None:
    """Write zeros over every array, the largest first (each fill releases the GIL)."""
    for a in sorted(arrays, key=lambda a: a.nbytes, reverse=True):
        a.fill(0)


def _zeroing(arrays: list[np.ndarray]) -> Future:
    """`_zero_all` on a thread of its own: numpy's fill runs without the GIL, so the replay's
    pages are touched beside the job's other start-up (its envs made, its nets, its optimizer);
    the future's result() waits for it and raises what it raised."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="replay-zeroing")
    done = pool.submit(_zero_all, arrays)
    pool.shutdown(wait=False)  # the thread ends once the fill has
    return done


def _storage(capacity: int, example: Sequences, prefault: bool) -> tuple[tuple, dict, Future | None]:
    """Storage for `capacity` sequences like `example`, zeroed once the returned future's
    result() returns (None: zero already): the storage a job before released if it has these
    shapes (its pages touched, zeroed again), else a new one (what was kept is freed first), its
    pages touched with `prefault`."""
    key = (capacity, *((f, getattr(example, f).shape[1:], getattr(example, f).dtype.str) for f in FIELDS))
    with _KEPT_LOCK:
        kept = _KEPT.pop() if _KEPT else None
    if kept is not None and kept[0] == key:
        return key, kept[1], _zeroing(list(kept[1].values()))
    del kept
    store = {f: small_pages((capacity, *getattr(example, f).shape[1:]), getattr(example, f).dtype) for f in FIELDS}
    # touch every page before the actors' first step, not on their path (docs/algorithms.md)
    return key, store, _zeroing(list(store.values())) if prefault else None


class SequenceReplay:
    def __init__(self, capacity: int, example: Sequences, alpha: float, beta: float, seed: int, prefault: bool = False):
        self.capacity, self.alpha, self.beta = capacity, alpha, beta
        self._key, self._store, self._zeroing = _storage(capacity, example, prefault)
        self._priority = np.zeros(capacity, dtype=np.float64)  # already ^alpha
        self._generation = np.zeros(capacity, dtype=np.int64)
        self._next = 0
        self.size = 0
        self.inserted = 0  # sequences ever inserted
        self.sampled = 0  # sequences ever handed to the learner
        self.dropped = 0  # sampled rows overwritten while they were copied (dropped from their batch)
        self._rng = np.random.default_rng(seed)
        self.lock = threading.Lock()
        self.on_insert = lambda: None  # called after each insert (a free-coupling learner sets its wakeup's ring)

    @staticmethod
    def example(length, obs_shape, obs_dtype, num_actions, state_size, stack=1) -> Sequences:
        """One zero sequence with the stored shapes and dtypes."""
        frame = frame_shape(obs_shape, stack)
        return Sequences(
            frames=np.zeros((1, length, *frame), obs_dtype),
            head=np.zeros((1, stack - 1, *frame), obs_dtype),
            action=np.zeros((1, length), np.int64),
            prev_action=np.zeros((1, length), np.int64),
            reward=np.zeros((1, length), np.float32),
            done=np.zeros((1, length), bool),
            agent_out=np.zeros((1, length, num_actions), np.float32),
            state=np.zeros((1, state_size), np.float32),
        )

    @classmethod
    def bytes_per_sequence(cls, *shapes, **kw) -> int:
        """Bytes one stored sequence takes (same arguments as `example`)."""
        ex = cls.example(*shapes, **kw)
        return sum(getattr(ex, f).nbytes for f in FIELDS)

    @classmethod
    def for_shapes(cls, capacity, length, obs_shape, obs_dtype, num_actions, state_size, stack=1, **kw):
        return cls(capacity, cls.example(length, obs_shape, obs_dtype, num_actions, state_size, stack), **kw)

    def ready(self) -> None:
        """Return once the storage is zeroed and its pages touched (a job's build waits here
        before its actors' first step; an insert or a sample before it waits too)."""
        zeroing = self._zeroing
        if zeroing is not None:
            zeroing.result()
            self._zeroing = None

    def release(self) -> None:
        """Hand this replay's storage to the next job of the process (its job ended; nothing
        reads this replay again)."""
        self.ready()
        with _KEPT_LOCK:
            _KEPT[:] = [(self._key, self._store)]

    def nbytes(self) -> int:
        return sum(a.nbytes for a in self._store.values())

    def insert(self, seqs: Sequences, priorities: np.ndarray) -> None:
        self.ready()
        k = len(seqs)
        with self.lock:
            slots = (self._next + np.arange(k)) % self.capacity
            self._generation[slots] += 1  # before the copy: a sample copying these rows now drops them
            for f in FIELDS:
                self._copy_in(f, slots, getattr(seqs, f))
            self._priority[slots] = np.maximum(priorities, 1e-6) ** self.alpha
            self._next = int((self._next + k) % self.capacity)
            self.size = min(self.size + k, self.capacity)
            self.inserted += k
        self.on_insert()

    def _copy_in(self, field: str, slots: np.ndarray, values) -> None:
        if isinstance(values, list):  # rows of views (pieces in time order): copy straight in
            for slot, pieces in zip(slots, values, strict=True):
                t = 0
                for piece in pieces:
                    self._store[field][slot, t : t + len(piece)] = piece
                    t += len(piece)
        else:
            self._store[field][slots] = values

    def sample(self, batch_size: int):
        """Returns (slots, generations, Sequences, importance weights) of the rows that survived
        their copy: normally batch_size, fewer when inserts overwrote rows during the copy."""
        self.ready()
        with self.lock:  # bookkeeping only
            if self.size == 0:
                raise RuntimeError("sample() on an empty replay")
            p = self._priority[: self.size]
            probs = p / p.sum()
            slots = self._rng.choice(self.size, size=batch_size, p=probs)
            gens = self._generation[slots].copy()
            weights = importance_weights(probs[slots], self.size, self.beta)
        rows = {f: self._store[f][slots] for f in FIELDS}  # the big copy, outside the lock
        with self.lock:
            live = self._generation[slots] == gens
        self.dropped += int((~live).sum())
        self.sampled += int(live.sum())
        batch = Sequences(**{f: v[live] for f, v in rows.items()}) if not live.all() else Sequences(**rows)
        return slots[live], gens[live], batch, weights[live]

    def update_priorities(self, slots, generations, priorities) -> None:
        with self.lock:
            live = self._generation[slots] == generations
            self._priority[slots[live]] = np.maximum(priorities[live], 1e-6) ** self.alpha
