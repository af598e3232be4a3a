"""CPU utilisation: pure process-tree math, CpuSource on a fake psutil, a real smoke test."""

from __future__ import annotations

import threading
import time
from collections import namedtuple

import pytest

from rlbench.telemetry.cpu import CHILDREN_TTL_S, CpuSource, core_busy, tree_cpu_delta, tree_utilisation

from .fakes import FakeClock, FakeProcess, FakePsutil


def test_tree_cpu_delta_hand_values() -> None:
    prev = {(1, 10.0): 5.0, (2, 11.0): 1.0, (3, 12.0): 4.0}
    cur = {
        (1, 10.0): 6.5,  # +1.5
        (2, 11.0): 1.25,  # +0.25
        # (3, 12.0) exited: its last interval is not seen
        (3, 99.0): 0.5,  # pid 3 recycled: a new process, counted in full
        (4, 13.0): 2.0,  # new child, counted in full
    }
    assert tree_cpu_delta(prev, cur) == pytest.approx(4.25)
    assert tree_cpu_delta({(1, 1.0): 3.0}, {(1, 1.0): 2.0}) == 0.0  # never negative


def test_tree_utilisation_hand_values() -> None:
    assert tree_utilisation(3.0, 2.0, 8) == (pytest.approx(0.1875), pytest.approx(1.5))
    assert tree_utilisation(3.0, 2.0, None) == (None, pytest.approx(1.5))
    assert tree_utilisation(1.0, 0.0, 8) == (None, None)


def test_core_busy_hand_values() -> None:
    """All but idle and iowait over all, guest time counted once (Linux has it in user too),
    a counter that went back as 0, and a core whose counters did not move unknown (None)."""
    t = namedtuple("scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")
    before = [t(10, 0, 5, 80, 5, 0, 0, 0, 0, 0), t(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), t(3, 0, 0, 3, 0, 0, 0, 0, 0, 0)]
    after = [t(13, 0, 6, 84, 7, 0, 0, 0, 2, 0), t(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), t(2, 0, 0, 5, 0, 0, 0, 0, 0, 0)]
    # core 0: user +3 (2 of it guest), system +1, idle +4, iowait +2: busy 4 of 10
    assert core_busy(before, after) == (pytest.approx(0.4), None, 0.0)


def test_samples_from_another_thread_measure_from_the_previous_sample() -> None:
    """psutil's cpu_percent keeps one baseline per calling thread: the telemetry thread's first
    sample after one in the main thread measured nothing and read 0 on every core."""
    src = CpuSource()
    src.sample()  # the main thread (a job's first row)
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        pass
    samples: list = []
    worker = threading.Thread(target=lambda: samples.append(src.sample()))
    worker.start()
    worker.join()
    assert max(samples[0].per_core) > 0.2, samples[0]  # this thread kept a core busy


def test_cpu_source_on_fake_psutil() -> None:
    child = FakeProcess(pid=11, created=2.0, user=1.0)
    root = FakeProcess(pid=10, created=1.0, user=2.0, system=1.0, kids=[child])
    ps, clock = FakePsutil(root, n_threads=4), FakeClock(100.0)
    src = CpuSource(psutil_module=ps, pid=10, clock=clock)
    ps.run_cores([1.0, 0.5, 0.0, 0.1], 2.0)
    root.user += 1.0  # +1.0
    child.system += 0.5  # +0.5
    grandchild = FakeProcess(pid=12, created=3.0, user=0.5)  # born in the interval
    child.kids.append(grandchild)
    clock.advance(CHILDREN_TTL_S)  # the tree is listed again: the grandchild counts
    s = src.sample()
    assert s.per_core == pytest.approx((1.0, 0.5, 0.0, 0.1))
    assert s.util == pytest.approx(0.4)
    assert s.proc_cores_busy == pytest.approx(2.0 / CHILDREN_TTL_S)
    assert s.proc_util == pytest.approx(0.5 / CHILDREN_TTL_S)


def test_children_are_listed_at_most_every_ttl() -> None:
    root = FakeProcess(pid=10, created=1.0)
    ps, clock = FakePsutil(root, n_threads=1), FakeClock(100.0)
    src = CpuSource(psutil_module=ps, pid=10, clock=clock)
    root.kids.append(FakeProcess(pid=11, created=2.0, user=1.0))
    clock.advance(CHILDREN_TTL_S / 2)
    assert src.sample().proc_cores_busy == pytest.approx(0.0)  # not listed yet
    clock.advance(CHILDREN_TTL_S)
    src.sample()
    root.kids[0].user += 1.0
    clock.advance(1.0)
    assert src.sample().proc_cores_busy == pytest.approx(1.0)


def test_exited_child_is_skipped() -> None:
    child = FakeProcess(pid=11, created=2.0, user=1.0)
    root = FakeProcess(pid=10, created=1.0, kids=[child])
    clock = FakeClock()
    src = CpuSource(psutil_module=FakePsutil(root, n_threads=2), pid=10, clock=clock)
    child.gone = True
    root.user += 0.5
    clock.advance(0.5)
    s = src.sample()
    assert s.proc_cores_busy == pytest.approx(1.0) and s.proc_util == pytest.approx(0.5)


def test_real_psutil_sees_this_process_busy() -> None:
    src = CpuSource()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:
        pass
    s = src.sample()
    assert s.proc_cores_busy is not None and s.proc_cores_busy > 0.1  # ~1 thread busy (lenient for loaded hosts)
    assert 0.0 <= s.proc_util <= 1.0 and 0.0 <= s.util <= 1.0
    assert len(s.per_core) == src.n_threads
