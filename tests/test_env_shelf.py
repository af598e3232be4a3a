"""Envs kept between the jobs of one process (rlbench/envs/shelf.py): a reused env, reseeded and
reset, gives the episodes of a new one with the same seed; what cannot settle is closed, not kept."""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import pytest

from rlbench.envs.shelf import EnvShelf, shelf_key


class FakeEnv:
    def __init__(self, settles: bool = True):
        self.settles, self.closed = settles, False

    def settle(self) -> bool:
        return self.settles

    def close(self) -> None:
        self.closed = True


def test_the_shelf_gives_back_an_env_only_for_its_own_key():
    shelf, env = EnvShelf(max_envs=8), FakeEnv()
    assert shelf.shelve(("a",), env, 4)
    assert shelf.take(("b",), FakeEnv) is not env  # another spec: a new one
    assert shelf.take(("a",), FakeEnv) is env and shelf.taken == 1
    assert shelf.take(("a",), FakeEnv) is not env  # taken once: gone from the shelf
    assert not env.closed


def test_an_env_that_cannot_settle_or_does_not_fit_is_closed_and_the_oldest_goes_first():
    shelf = EnvShelf(max_envs=8)
    stuck, big = FakeEnv(settles=False), FakeEnv()
    assert not shelf.shelve(("a",), stuck, 2) and stuck.closed
    assert not shelf.shelve(("b",), big, 9) and big.closed
    old, new = FakeEnv(), FakeEnv()
    shelf.shelve(("old",), old, 5)
    shelf.shelve(("new",), new, 5)  # 10 > 8: the oldest is closed
    assert old.closed and not new.closed and len(shelf) == 1
    shelf.clear()
    assert new.closed and len(shelf) == 0


def test_the_key_holds_every_env_setting_and_how_it_is_stepped_but_not_the_seed():
    from rlbench.envs.atari.family import Schema

    base = shelf_key(Schema(id="pong"), 4, 2, -1, -1)
    assert base == shelf_key(Schema(id="pong"), 4, 2, -1, -1)
    for other in (
        shelf_key(Schema(id="pong", max_episode_frames=400), 4, 2, -1, -1),
        shelf_key(Schema(id="pong", noop_max=3), 4, 2, -1, -1),
        shelf_key(Schema(id="pong"), 8, 2, -1, -1),
        shelf_key(Schema(id="pong"), 4, 1, -1, -1),
        shelf_key(Schema(id="pong"), 4, 2, 0, -1),
        shelf_key(Schema(id="pong"), 4, 2, -1, 0),
    ):
        assert other != base


STEPS = 12  # per env: 20-frame episodes of 5 steps end twice inside
PONG = {"id": "pong", "max_episode_frames": 20, "sticky_actions": 0.25, "noop_max": 30}


def _episodes(env, seed: int, steps: int = STEPS) -> dict[int, list]:
    """Each env's first `steps` + 1 (observation digest, reward, episode end), for actions fixed
    by (env id, its own step count), stepping until every env has made `steps` steps: a function
    of the seed and each env's own actions only, whichever envs a partial batch returns first
    (that order is the threads' timing). The first entry's end flag is left out: it tells which
    call brought the reset back (reset(): True, a later recv(): False), which is that order."""
    batch, seen = env.reset(seed), {}
    while len(seen) < env.num_envs or min(map(len, seen.values())) <= steps:
        for i, obs, r, d in zip(
            batch.env_ids.tolist(), batch.obs, batch.reward.tolist(), batch.done.tolist(), strict=True
        ):
            end = d if i in seen else None  # an env's first entry: its reset
            seen.setdefault(i, []).append((hashlib.sha1(obs.tobytes()).hexdigest(), r, end))
        counts = np.array([len(seen[i]) for i in batch.env_ids.tolist()])
        env.send(((batch.env_ids * 7 + counts * 5) % env.num_actions).astype(np.int64))
        batch = env.recv()  # the loop ends with steps in flight, as a job's does
    return {i: seen[i][: steps + 1] for i in sorted(seen)}


def _atari(batch: int, envs: int = 4):
    from rlbench.envs.atari.family import Schema, make

    return make(Schema(**PONG), envs, 2, batch)


@functools.cache  # one new env per (batch, seed) serves every test of the module
def _fresh_episodes(batch: int, seed: int) -> dict[int, list]:
    env = _atari(batch)
    try:
        return _episodes(env, seed)
    finally:
        env.close()


def test_each_env_plays_the_same_episodes_whichever_envs_a_partial_batch_returns_first():
    """Partial batches (2 of 4 envs per recv()) against lock-step, both new envs: the same
    episodes per env, so comparing them does not depend on the threads' timing."""
    lock_step = _fresh_episodes(0, seed=9)
    assert any(d for steps in lock_step.values() for _, _, d in steps[1:])  # an episode ended inside
    assert _fresh_episodes(2, seed=9) == lock_step
    assert _fresh_episodes(0, seed=10) != lock_step  # the seed reaches the episodes


@pytest.mark.parametrize("batch", [0, 2, 1], ids=["lock-step", "half-the-envs", "one-env"])
def test_a_reused_atari_env_gives_the_episodes_of_a_new_one_with_the_same_seed(batch):
    """State a job leaves: steps in flight (partial batches: envs - batch), episode frame counts
    (a 20-step limit ends episodes inside the run), sticky actions' and no-ops' draws; seeds 0
    and 9 (0 must not be taken for no seed). The new env steps lock-step, so what it plays does
    not depend on the threads' timing, and neither does the reused env's (the test above)."""
    shelf, key = EnvShelf(), ("pong", batch)
    used = _atari(batch)
    _episodes(used, seed=123)  # the job before
    assert used._in_flight == (0 if batch == 0 else 4 - batch)
    assert shelf.shelve(key, used, 4)  # settles: receives the steps in flight
    reused = shelf.take(key, lambda: pytest.fail("the shelf made a new env"))
    try:
        for seed in (9, 0):
            assert _episodes(reused, seed) == _fresh_episodes(0, seed)
            assert reused.settle()
    finally:
        reused.close()


def test_an_atari_env_whose_batch_does_not_divide_its_envs_does_not_settle():
    from rlbench.envs.atari.family import Schema, make

    env = make(Schema(id="pong"), 3, 1, 2)  # recv() returns 2 at a time; 3 envs leave one over
    _episodes(env, seed=1, steps=3)
    assert env._in_flight == 1 and not env.settle()
    assert not EnvShelf().shelve(("k",), env, 3)  # closed, not kept


def test_a_second_job_of_the_same_spec_takes_the_first_ones_env_and_plays_its_episodes(compose_cfg):
    """The trainer shelves a job's env when it ends well; the next job of the same spec and seed
    takes it and records the same episodes (algo=random: actions from the seed alone)."""
    from rlbench.core.observers import JobObserver
    from rlbench.envs.shelf import SHELF
    from rlbench.prepare.plan import plan_job
    from rlbench.prepare.validate import validate
    from rlbench.train.trainer import train

    class Episodes(JobObserver):
        def __init__(self):
            self.returns = []

        def episode(self, ret, frames, evaluation):
            self.returns.append((frames, ret))

    conf = validate(
        compose_cfg(
            [
                "env=cartpole",
                "algo=random",
                "workload=smoke",
                "workload.frames=2000",
                "actors=2",
                "telemetry.enabled=false",
                "progress=log",
            ]
        )
    )
    SHELF.clear()
    taken, seen = SHELF.taken, []
    try:
        for _ in range(2):
            watch = Episodes()
            train(plan_job(conf), [watch])
            seen.append(watch.returns)
        assert SHELF.taken == taken + 1 and len(SHELF) == 1
        assert seen[0] and seen[1] == seen[0]
    finally:
        SHELF.clear()
