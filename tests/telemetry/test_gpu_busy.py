"""IntervalUnion by hand-computed cases; CudaBusyTimer on a fake CUDA timeline with spans from two
threads that interleave and finish out of order (busy time is their union, each counted once)."""

from __future__ import annotations

import threading

import pytest

from rlbench.telemetry.gpu_busy import CudaBusyTimer, IntervalUnion

from .fakes import FakeCuda


def union(*batches: list[tuple[float, float]]) -> float:
    u = IntervalUnion()
    for batch in batches:
        u.extend(batch)
    return u.total


@pytest.mark.parametrize(
    ("intervals", "length"),
    [
        ([], 0.0),
        ([(0, 2), (5, 6)], 3.0),  # disjoint
        ([(0, 10), (2, 3), (4, 9)], 10.0),  # nested
        ([(0, 10), (5, 12)], 12.0),  # overlapping
        ([(0, 2), (2, 5)], 5.0),  # touching
        ([(5, 12), (20, 21), (0, 10)], 13.0),  # out of order in the batch
        ([(3, 3), (1, 2)], 1.0),  # empty interval
    ],
)
def test_interval_union_lengths(intervals: list[tuple[float, float]], length: float) -> None:
    assert union(intervals) == length


def test_interval_union_across_batches_counts_each_instant_once() -> None:
    assert union([(0, 10)], [(4, 8)], [(6, 15), (9, 11)], [(20, 22)]) == 17.0


class SpanThread:
    """`with timer.span()` held open in its own thread from open() until close()."""

    def __init__(self, timer: CudaBusyTimer) -> None:
        self.entered, self.leave = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._body, args=(timer,))

    def _body(self, timer: CudaBusyTimer) -> None:
        with timer.span():
            self.entered.set()
            assert self.leave.wait(10)

    def open(self) -> SpanThread:
        self.thread.start()
        assert self.entered.wait(10)
        return self

    def close(self) -> None:
        self.leave.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_overlapping_spans_of_two_threads_count_their_union() -> None:
    cuda = FakeCuda()
    timer = CudaBusyTimer("cuda", cuda=cuda)
    learner = SpanThread(timer).open()  # [0, 10]
    cuda.now = 5.0
    inference = SpanThread(timer).open()  # [5, 12]
    cuda.now = 10.0
    learner.close()
    cuda.now = 12.0
    inference.close()
    assert timer.busy_s() == 0.012  # not 0.017, the sum
    assert timer.busy_s(wait=True) == 0.012  # counted once


def test_span_finishing_after_a_later_one_holds_it_back_then_counts_once() -> None:
    cuda = FakeCuda(done_ms=0.0)
    timer = CudaBusyTimer("cuda", cuda=cuda)
    learner = SpanThread(timer).open()  # [0, 20]
    cuda.now = 5.0
    inference = SpanThread(timer).open()  # [5, 8]
    cuda.now = 8.0
    inference.close()
    cuda.now, cuda.done_ms = 20.0, 9.0
    learner.close()  # ended, but the device has not reached its end
    assert timer.busy_s() == 0.0  # [5, 8] starts after the unfinished [0, 20]: held back
    cuda.done_ms = 20.0
    assert timer.busy_s() == 0.020  # not 0.023 (sum), nor 0.015 ([5, 8] swept first)
    assert timer.busy_s() == 0.020


def test_open_span_holds_back_later_spans_of_other_threads() -> None:
    cuda = FakeCuda()
    timer = CudaBusyTimer("cuda", cuda=cuda)
    learner = SpanThread(timer).open()  # [0, 12], still open while the other span ends
    cuda.now = 5.0
    with timer.span():  # [5, 8] in this thread
        cuda.now = 8.0
    assert timer.busy_s() == 0.0
    cuda.now = 12.0
    learner.close()
    assert timer.busy_s() == 0.012  # not 0.007 ([5, 8] swept before [0, 12])


def test_span_whose_start_the_device_has_not_reached_holds_nothing_back() -> None:
    cuda = FakeCuda(done_ms=4.0)
    timer = CudaBusyTimer("cuda", cuda=cuda)
    with timer.span():  # [0, 3], complete
        cuda.now = 3.0
    cuda.now = 5.0
    learner = SpanThread(timer).open()  # starts at 5, not reached by the device yet
    assert timer.busy_s() == 0.003
    cuda.now = 9.0
    learner.close()
    assert timer.busy_s() == 0.003  # its end is not reached either
    assert timer.busy_s(wait=True) == 0.007


def test_wait_synchronises_every_ended_span() -> None:
    cuda = FakeCuda(done_ms=-1.0)
    timer = CudaBusyTimer("cuda", cuda=cuda)
    for start, end in [(0.0, 4.0), (6.0, 7.0), (7.0, 9.0)]:
        cuda.now = start
        with timer.span():
            cuda.now = end
    assert timer.busy_s() == 0.0
    assert timer.busy_s(wait=True) == 0.007
