"""SEED RL's coupling of actors, inference and R2D2's learner (algo.coupling=unroll_queue).

The unroll queue between inference and replay (inference blocks while it is full), the
insertion batch int(batch / replay_ratio) the learner moves before each update, the task's
updates that follow from it, and the refusals of a coupling that cannot make progress.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rlbench.algo.common.unrolls import Sequences
from rlbench.algo.r2d2.config import task_learner_updates
from rlbench.algo.r2d2.sequences import fill_insertions, insertion_batch, unrolls_for_updates
from rlbench.algo.r2d2.unroll_queue import UnrollQueue
from rlbench.config.rules import ConfigError
from rlbench.prepare.validate import validate
from tests.conftest import wait_until

WAIT_S = 5.0


def _unrolls(first: int, k: int) -> Sequences:
    """k one-step unrolls whose every field holds its index first, first + 1, ..."""
    v = np.arange(first, first + k)
    return Sequences(
        frames=v[:, None, None].astype(np.uint8),
        head=np.zeros((k, 0, 1), np.uint8),
        action=v[:, None],
        prev_action=v[:, None],
        reward=v[:, None].astype(np.float32),
        done=np.zeros((k, 1), bool),
        agent_out=v[:, None, None].astype(np.float32),
        state=v[:, None].astype(np.float32),
    )


class _Blocked:
    """The `blocked` operation inference passes: counts how often it was entered."""

    def __init__(self):
        self.entered = threading.Event()
        self.count = 0

    def __call__(self):
        outer = self

        class _Op:
            def __enter__(self):
                outer.count += 1
                outer.entered.set()

            def __exit__(self, *exc):
                return False

        return _Op()


def test_put_that_does_not_fit_blocks_until_the_learner_takes_and_keeps_the_order():
    q, blocked = UnrollQueue(4), _Blocked()
    q.put(_unrolls(0, 3), np.arange(3.0), blocked)
    assert blocked.count == 0  # room: no wait timed
    putter = threading.Thread(target=q.put, args=(_unrolls(3, 4), np.arange(3.0, 7.0), blocked))
    putter.start()
    assert blocked.entered.wait(WAIT_S)  # one row went in, three wait for room
    wait_until(lambda: q.size == 4, WAIT_S, "the first row of the second put queued")
    seqs, prios = q.take(3)
    assert seqs.action[:, 0].tolist() == [0, 1, 2] and prios.tolist() == [0, 1, 2]
    putter.join(WAIT_S)
    assert not putter.is_alive() and q.size == 4 and q.put_total == 7
    seqs, prios = q.take(10)  # takes what there is: the second put, in order, split across chunks
    assert seqs.action[:, 0].tolist() == [3, 4, 5, 6] and prios.tolist() == [3, 4, 5, 6] and q.size == 0


def test_close_releases_a_blocked_put_and_later_puts_are_dropped_and_counted():
    q, blocked = UnrollQueue(2), _Blocked()
    q.put(_unrolls(0, 2), np.zeros(2))
    putter = threading.Thread(target=q.put, args=(_unrolls(2, 3), np.zeros(3), blocked))
    putter.start()
    assert blocked.entered.wait(WAIT_S)
    q.close()  # the learner left (task done, stopped or failed)
    putter.join(WAIT_S)
    assert not putter.is_alive() and q.dropped == 3 and q.size == 2
    q.put(_unrolls(5, 1), np.zeros(1))
    assert (q.dropped, q.put_total, q.size) == (4, 6, 2)


def test_put_rings_the_learner_as_rows_go_in_before_it_waits_for_room():
    q, blocked, rung = UnrollQueue(2), _Blocked(), []
    q.on_put = lambda: rung.append(q.size)  # R2D2Learner sets its wakeup's ring
    q.put(_unrolls(0, 1), np.zeros(1))
    assert rung == [1]
    putter = threading.Thread(target=q.put, args=(_unrolls(1, 3), np.zeros(3), blocked))
    putter.start()
    assert blocked.entered.wait(WAIT_S)
    assert rung == [1, 2]  # the row that fit rang before the put waited: the learner takes from a full queue
    q.take(2)
    putter.join(WAIT_S)
    assert not putter.is_alive() and rung == [1, 2, 2]


def test_take_from_an_empty_queue_returns_nothing():
    seqs, prios = UnrollQueue(3).take(2)
    assert seqs is None and len(prios) == 0


def test_insertion_batch_is_seeds_int_of_batch_over_ratio():
    # agents/r2d2/learner.py get_replay_insertion_batch_size: int(batch_size / replay_ratio)
    assert insertion_batch(64, 0.75) == 85 and insertion_batch(64, 1.5) == 42 and insertion_batch(32, 4.0) == 8
    assert insertion_batch(64, 0) == 0
    # the data thread inserts until replay has min_replay, then samples: 5000 / 85 -> 59 batches first
    assert fill_insertions(5000, 85) == 59 and fill_insertions(50, 85) == 1 and fill_insertions(85, 85) == 1
    assert unrolls_for_updates(7, 85, 50) == 7 * 85 and unrolls_for_updates(3, 8, 64) == 10 * 8
    assert unrolls_for_updates(0, 85, 50) == 0


def test_the_default_task_is_seven_updates_of_85_fresh_unrolls(compose_cfg):
    conf = validate(compose_cfg([]))  # Pong, 200k frames: 625 sequences of 80 trained steps
    a = conf.algo
    assert (a.coupling, a.samples_per_insert, a.unroll_queue_size) == ("unroll_queue", 0.75, 100)
    assert conf.workload.learner_updates == task_learner_updates(conf) == 625 // 85 == 7
    free = validate(compose_cfg(["algo.coupling=free_running"]))
    assert free.workload.learner_updates == round(625 * 0.75 / 64) == 7


@pytest.mark.parametrize(
    "overrides, refused",
    [
        (["algo.unroll_queue_size=84"], "algo.unroll_queue_size=84"),  # < one insertion batch (85)
        (["algo.samples_per_insert=0"], "algo.samples_per_insert=0"),  # no insertion batch
        (["algo.samples_per_insert=65"], "algo.samples_per_insert=65"),  # int(64 / 65) = 0 unrolls per update
    ],
)
def test_a_coupling_that_cannot_make_progress_is_refused(compose_cfg, overrides, refused):
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg(overrides))
    assert refused in str(e.value) and "allowed:" in str(e.value)


def test_the_free_running_couplings_keep_their_old_rules(compose_cfg):
    conf = validate(
        compose_cfg(
            [
                "algo.coupling=free_running",
                "algo.samples_per_insert=0",
                "workload.learner_updates=3",
                "algo.unroll_queue_size=1",
            ]
        )
    )
    assert conf.algo.coupling == "free_running"
    with pytest.raises(ConfigError, match="algo.coupling='both': allowed: one of unroll_queue"):
        validate(compose_cfg(["algo.coupling=both"]))
