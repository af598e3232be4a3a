"""Sequence assembly with burn-in overlap, and the prioritized sequence replay."""

import itertools
from pathlib import Path

import numpy as np
import pytest

from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import sequence_starts, sequences_per_actor, unroll_layout


def _feed(asm, steps, ids, state_of=lambda i, t: float(t)):
    """Feed `steps` steps where every field encodes (actor, t); returns emitted sequences."""
    out = []
    for t in range(steps):
        k = len(ids)
        obs = np.array([[i * 1000 + t] for i in ids], dtype=np.int32)
        need = asm.needs_state(ids)
        hidden = asm.start_state.shape[-1]
        state = np.array([np.full(hidden, state_of(i, t)) for i in ids], np.float32)[need]
        asm.add(
            ids,
            obs,
            np.full(k, t),
            np.full(k, t - 1),
            np.full(k, t, np.float32),
            np.full(k, t % 7 == 0),
            np.zeros((k, 3), np.float32),
            state,
            sink=lambda s: out.append(s.owned()),
        )
    return out


def test_overlapping_sequences_match_the_stream_and_carry_their_start_state():
    length, overlap = 6, 2
    asm = UnrollAssembler(3, length, overlap, (1,), np.int32, 3, 2)
    emitted = _feed(asm, 14, np.array([0, 2]))
    starts = sequence_starts(14, length, overlap)  # [0, 4, 8]
    assert len(emitted) == len(starts)
    for seqs, start in zip(emitted, starts, strict=True):
        assert len(seqs) == 2
        for row, actor in enumerate([0, 2]):
            assert seqs.frames[row, :, 0].tolist() == [actor * 1000 + start + j for j in range(length)]
            assert seqs.action[row].tolist() == list(range(start, start + length))
            assert seqs.done[row].tolist() == [(start + j) % 7 == 0 for j in range(length)]
            assert np.all(seqs.state[row] == start)  # state recorded before its first step


def test_actors_reporting_at_different_times_are_kept_apart():
    asm = UnrollAssembler(2, 4, 0, (1,), np.int32, 3, 1)
    assert _feed(asm, 3, np.array([0])) == []
    out = _feed(asm, 4, np.array([1]))  # actor 1 completes first, actor 0 still at 3
    assert len(out) == 1 and out[0].frames[0, :, 0].tolist() == [1000, 1001, 1002, 1003]
    out = _feed(asm, 1, np.array([0]))
    assert len(out) == 1 and out[0].frames[0, :, 0].tolist() == [0, 1, 2, 0]


def test_overlap_above_half_is_refused():
    with pytest.raises(ValueError, match="overlap"):
        UnrollAssembler(1, 6, 4, (1,), np.int32, 3, 1)


def _seqs(k, length=4, value=0):
    asm = UnrollAssembler(k, length, 0, (2,), np.uint8, 3, 2)
    ids = np.arange(k)
    out = []
    for t in range(length):
        asm.add(
            ids,
            np.full((k, 2), value + t, np.uint8),
            np.zeros(k, np.int64),
            np.zeros(k, np.int64),
            np.zeros(k, np.float32),
            np.zeros(k, bool),
            np.zeros((k, 3), np.float32),
            np.zeros((k, 2), np.float32),
            sink=lambda s: out.append(s),
        )
    return out[0]


def test_replay_is_bounded_fifo():
    rb = SequenceReplay.for_shapes(3, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0)
    rb.insert(_seqs(2, value=10), np.ones(2))
    rb.insert(_seqs(2, value=20), np.ones(2))
    assert rb.size == 3 and rb.inserted == 4
    stored = sorted(int(v) for v in rb._store["frames"][:, 0, 0])
    assert stored == [10, 20, 20]  # the oldest sequence was overwritten


def test_replay_rings_after_each_insert():
    rb, rung = SequenceReplay.for_shapes(3, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0), []
    rb.on_insert = lambda: rung.append(rb.inserted)  # a free-coupling R2D2Learner sets its wakeup's ring
    rb.insert(_seqs(2), np.ones(2))
    rb.insert(_seqs(2), np.ones(2))
    assert rung == [2, 4]


def test_replay_samples_proportionally_and_weights_rare_samples_higher():
    rb = SequenceReplay.for_shapes(2, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=1.0, seed=0)
    rb.insert(_seqs(2), np.array([1.0, 9.0]))
    slots, _, _, w = rb.sample(10_000)
    share = np.mean(slots == 1)
    assert share == pytest.approx(0.9, abs=0.02)
    assert w[slots == 0].max() == pytest.approx(1.0) and w[slots == 1].max() == pytest.approx(1 / 9, rel=1e-4)


def test_priority_update_skips_overwritten_slots():
    rb = SequenceReplay.for_shapes(2, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=1.0, seed=0)
    rb.insert(_seqs(2), np.array([1.0, 1.0]))
    slots, gens, _, _ = rb.sample(2)
    rb.insert(_seqs(2), np.array([5.0, 5.0]))  # both slots overwritten
    rb.update_priorities(slots, gens, np.array([100.0, 100.0]))
    assert np.allclose(rb._priority, [5.0, 5.0])


def test_replay_copies_wrapped_ring_pieces_in_time_order():
    asm = UnrollAssembler(1, 6, 2, (1,), np.int32, 3, 1)
    got = []
    rb = SequenceReplay.for_shapes(4, 6, (1,), np.int32, 3, 1, alpha=1.0, beta=1.0, seed=0)
    for t in range(14):
        asm.add(
            np.array([0]),
            np.array([[t]], np.int32),
            np.array([t]),
            np.array([t - 1]),
            np.zeros(1, np.float32),
            np.zeros(1, bool),
            np.zeros((1, 3), np.float32),
            None,
            sink=lambda s: (got.append(s.owned()), rb.insert(s, np.ones(len(s)))),
        )
    assert [g.frames[0, :, 0].tolist() for g in got] == [list(range(s, s + 6)) for s in (0, 4, 8)]
    assert rb._store["frames"][:3, :, 0].tolist() == [g.frames[0, :, 0].tolist() for g in got]


def test_trained_steps_of_consecutive_sequences_tile_the_stream():
    """SEED RL's layout: burn_in + seq_len + 1 steps, overlap burn_in + 1: every step after the
    first burn-in is trained in exactly one sequence (and bootstraps the one before)."""
    burn_in, seq_len = 3, 5
    length, overlap = unroll_layout(burn_in, seq_len, None)
    asm = UnrollAssembler(1, length, overlap, (1,), np.int32, 3, 1)
    emitted = _feed(asm, 40, np.array([0]))
    trained = [t for s in emitted for t in s.frames[0, burn_in : burn_in + seq_len, 0].tolist()]
    assert trained == list(range(burn_in, burn_in + len(emitted) * seq_len))
    for a, b in itertools.pairwise(emitted):  # the extra last step is the next sequence's first trained step
        assert a.frames[0, -1, 0] == b.frames[0, burn_in, 0]


def test_the_first_sequence_is_zero_padded_over_the_burn_in_so_every_step_is_trained():
    """SEED RL's UnrollStore starts each env's index at the overlap (R2D2: burn_in) over zeros:
    an actor's first sequence is burn_in zero steps then its first steps, so the trained steps
    tile the stream from its first step on (without the pad the first burn_in are never trained)."""
    burn_in, seq_len = 3, 5
    length, overlap = unroll_layout(burn_in, seq_len, None)
    asm = UnrollAssembler(1, length, overlap, (1,), np.int32, 3, 1, pad=burn_in)
    emitted = _feed(asm, 40, np.array([0]))
    first = emitted[0]
    assert first.frames[0, :burn_in, 0].tolist() == [0] * burn_in and not first.done[0, :burn_in].any()
    assert (first.reward[0, :burn_in] == 0).all() and (first.agent_out[0, :burn_in] == 0).all()
    trained = [t for s in emitted for t in s.frames[0, burn_in : burn_in + seq_len, 0].tolist()]
    assert trained == list(range(len(emitted) * seq_len))  # the stream's steps from 0 (_feed: frame = step)
    assert len(emitted) == sequences_per_actor(40, length, overlap, pad=burn_in) == (40 - 1) // seq_len


def test_sampling_copies_outside_the_lock_and_drops_rows_overwritten_meanwhile():
    rb = SequenceReplay.for_shapes(2, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=1.0, seed=0)
    rb.insert(_seqs(2, value=10), np.array([1.0, 1.0]))

    class InsertDuringCopy(np.ndarray):
        """The frames store: while the learner copies rows, an actor inserts (same thread: with
        the lock held by sample(), this would deadlock and the acquire below would time out)."""

        def __getitem__(self, key):
            if isinstance(key, np.ndarray):  # the learner's fancy-indexed copy
                assert rb.lock.acquire(timeout=5), "sample() held the replay lock during its copy"
                rb.lock.release()
                rb.insert(_seqs(1, value=50), np.array([1.0]))  # overwrites slot 0
            return super().__getitem__(key)

    rb._store["frames"] = rb._store["frames"].view(InsertDuringCopy)
    slots, _gens, batch, w = rb.sample(64)
    assert rb.dropped == int(64 - len(slots)) > 0
    assert set(slots.tolist()) == {1}  # only the row nobody overwrote survives
    assert np.all(np.asarray(batch.frames)[:, 0, 0] == 10) and len(w) == len(batch) == len(slots)


def test_a_released_replays_storage_serves_the_next_replay_of_its_shapes_zeroed():
    """A sweep's next job takes the memory the job before touched (`release`), as a new replay:
    all zeros; a replay of other shapes gets new storage."""
    from rlbench.algo.r2d2 import replay as module

    first = SequenceReplay.for_shapes(3, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0, prefault=True)
    first.insert(_seqs(2, value=10), np.ones(2))
    first.release()
    try:
        same = SequenceReplay.for_shapes(3, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=1, prefault=True)
        assert same._store["frames"] is first._store["frames"] and not module._KEPT
        same.ready()  # zeroed on a thread of its own, done once ready() returns
        assert all(not a.any() for a in same._store.values()) and same.size == 0
        same.release()
        other = SequenceReplay.for_shapes(3, 5, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0)
        assert other._store["frames"] is not first._store["frames"] and not module._KEPT
    finally:
        module._KEPT.clear()


def test_an_insert_before_the_storage_is_zeroed_waits_for_it(monkeypatch):
    """The zeroing runs on a thread of its own (beside a job's other start-up); an insert that
    comes first waits, so the zeros never land on its rows."""
    import threading

    from rlbench.algo.r2d2 import replay as module

    began, finished, zero_all = threading.Event(), threading.Event(), module._zero_all

    def slow(arrays):
        began.set()
        threading.Event().wait(0.3)
        zero_all(arrays)
        finished.set()

    monkeypatch.setattr(module, "_zero_all", slow)
    rb = SequenceReplay.for_shapes(3, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0, prefault=True)
    assert began.wait(5.0)
    seqs = _seqs(2, value=10)
    rb.insert(seqs, np.ones(2))
    assert finished.wait(5.0)  # the zeros have landed: the rows must have come after them
    expected = np.stack([np.concatenate(pieces) for pieces in seqs.frames])  # rows of pieces
    assert np.array_equal(rb._store["frames"][:2], expected) and expected.any() and rb.size == 2
    assert rb._zeroing is None  # waited once; later inserts go straight on


def test_the_zeroings_error_is_raised_where_the_replay_waits(monkeypatch):
    from rlbench.algo.r2d2 import replay as module

    def broken(arrays):
        raise MemoryError("no pages")

    monkeypatch.setattr(module, "_zero_all", broken)
    rb = SequenceReplay.for_shapes(3, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0, prefault=True)
    with pytest.raises(MemoryError, match="no pages"):
        rb.ready()


def _vm_flags(address: int) -> list[str]:
    """The kernel's VmFlags of the mapping that holds `address` (Linux's /proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    raise LookupError(f"no mapping holds {address:#x}")


@pytest.mark.skipif(
    not (Path("/proc/self/smaps").exists() and Path("/sys/kernel/mm/transparent_hugepage").exists()),
    reason="reads Linux's /proc/self/smaps, on a kernel with transparent huge pages",
)
def test_the_replays_large_fields_sit_on_small_pages_zeroed_and_writable(monkeypatch):
    """numpy asks for transparent huge pages for a large array; their first touch waited seconds
    for the kernel's compaction at a job's start (docs/results/startup.md, "The replay's storage")."""
    from rlbench.algo.common import pages

    monkeypatch.setattr(pages, "SMALL_PAGES_FROM", 4096)  # this test's frames are "large"
    rb = SequenceReplay.for_shapes(4096, 4, (2,), np.uint8, 3, 2, alpha=1.0, beta=0.5, seed=0, prefault=True)
    frames = rb._store["frames"]
    assert frames.nbytes >= 4096 and "nh" in _vm_flags(frames.ctypes.data)
    rb.insert(_seqs(2, value=7), np.ones(2))
    assert not frames[2:].any() and int(frames[0, 0, 0]) == 7
    assert "nh" not in _vm_flags(np.zeros(1 << 27, np.uint8).ctypes.data)  # numpy's own: huge pages allowed
    asm = UnrollAssembler(2, 4096, 0, (2,), np.uint8, 3, 2)  # the unroll rings: 16 KB of frames
    assert "nh" in _vm_flags(asm.frames.ctypes.data) and not asm.frames.any()
