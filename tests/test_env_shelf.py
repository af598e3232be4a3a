"""Envs kept between the jobs of one process (rlbench/envs/shelf.py): a reused env, reseeded and
reset, gives the episodes of a new one with the same seed; what cannot settle is closed, not kept."""

from __future__ import annotations

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


def _episodes(env, seed: int, steps: int) -> dict[int, list]:
    """Each env's (observation digest, reward, done) per step, for actions fixed by (env id, its
    step): the same whichever envs a partial batch returns first (only how many steps each env
    made within `steps` batches depends on the threads' timing)."""
    batch, seen = env.reset(seed), {}
    for _ in range(steps):
        for i, obs, r, d in zip(
            batch.env_ids.tolist(), batch.obs, batch.reward.tolist(), batch.done.tolist(), strict=True
        ):
            seen.setdefault(i, []).append((hash(obs.tobytes()), r, d))
        counts = np.array([len(seen[i]) for i in batch.env_ids.tolist()])
        env.send(((batch.env_ids * 7 + counts * 5) % env.num_actions).astype(np.int64))
        batch = env.recv()
    return seen


def test_a_partial_batch_atari_env_is_never_kept_for_another_job():
    """Only lock-step envs are kept (AtariVectorEnv.settle): a reused partial-batch env once played
    other episodes than a new one under CI's load."""
    from rlbench.envs.atari.family import Schema, make

    env = make(Schema(id="pong"), 4, 2, 2)  # recv() returns 2 of the 4 envs
    _episodes(env, seed=1, steps=3)
    assert not env.settle() and not EnvShelf().shelve(("k",), env, 4)  # closed, not kept


@pytest.mark.parametrize("batch", [0], ids=["lock-step"])
def test_a_reused_atari_env_gives_the_episodes_of_a_new_one_with_the_same_seed(batch):
    """State a job leaves: steps in flight, episode frame counts (a 20-step limit ends episodes
    inside the run), sticky actions' and no-ops' draws; seeds 0 and 9 (ale-py treats 0 apart)."""
    from rlbench.envs.atari.family import Schema, make

    cfg = Schema(id="pong", max_episode_frames=20, sticky_actions=0.25, noop_max=30)
    shelf, key = EnvShelf(), shelf_key(cfg, 4, 2, batch, -1)
    used = make(cfg, 4, 2, batch)
    _episodes(used, seed=123, steps=37)  # the job before: ends with steps in flight (partial batches)
    assert shelf.shelve(key, used, 4)
    reused = shelf.take(key, lambda: pytest.fail("the shelf made a new env"))
    for seed in (9, 0):
        fresh = make(cfg, 4, 2, batch)
        try:
            want, got = _episodes(fresh, seed, steps=50), _episodes(reused, seed, steps=50)
            # partial batches: which envs a run of 50 batches reaches depends on the threads' timing
            # (under load one env can stay in flight throughout), so compare the envs both reached
            common = {i: min(len(want[i]), len(got[i])) for i in set(want) & set(got)}
            assert set(got) | set(want) <= {0, 1, 2, 3} and len(common) >= 2 and min(common.values()) >= 5
            assert batch == 2 or set(got) == set(want) == {0, 1, 2, 3}  # lock-step: every env, every step
            assert any(d for i, n in common.items() for _, _, d in want[i][1:n])  # an episode ended inside
            assert all(got[i][:n] == want[i][:n] for i, n in common.items())
            assert reused.settle()
        finally:
            fresh.close()
    reused.close()


def test_an_atari_env_whose_batch_does_not_divide_its_envs_does_not_settle():
    from rlbench.envs.atari.family import Schema, make

    env = make(Schema(id="pong"), 3, 1, 2)  # recv() returns 2 at a time; 3 envs leave one over
    try:
        _episodes(env, seed=1, steps=3)
        assert not env.settle()
    finally:
        env.close()


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
