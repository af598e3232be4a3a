"""The Atari family's two engines (env.engine: ale-py, EnvPool): each setting reaches EnvPool,
both play the same game frame for frame, EnvPool's next-step reset reaches the actors as SEED's
same-step one, a fixed seed fixes each engine's episodes, and what one engine cannot run is
refused by the real command before any work (docs/envs.md, "Two engines")."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from rlbench.core.env_families import family
from rlbench.envs.atari.engines import envpool_missing
from tests.conftest import rlbench_cli
from tests.test_env_shelf import PONG, _episodes

pytestmark = pytest.mark.skipif(envpool_missing() is not None, reason=f"EnvPool: {envpool_missing()}")


def atari(**kw):
    return family("atari").Schema(**kw)


def make(engine: str, envs: int, batch: int, seed: int, threads: int = 2, offset: int = -1, **kw):
    return family("atari").make(atari(engine=engine, **kw), envs, threads, batch, offset, seed=seed)


def _affinities(tids) -> list[str]:
    out = []
    for tid in tids:
        with open(f"/proc/self/task/{tid}/status") as f:
            out += [ln.split()[1] for ln in f if ln.startswith("Cpus_allowed_list")]
    return out


def test_each_atari_setting_reaches_envpool_and_its_threads_are_pinned():
    cfg = dict(id="breakout", stack=2, img_size=64, frameskip=3, noop_max=7, fire_reset=True)
    cfg |= dict(full_action_space=False, sticky_actions=0.25, reward_clipping=True, max_episode_frames=301)
    before = set(os.listdir("/proc/self/task"))
    env = make("envpool", 4, 2, seed=11, threads=1, offset=0, **cfg)
    try:
        c = env._pool.config
        got = {k: c[k] for k in ("stack_num", "img_height", "img_width", "frame_skip", "noop_max")}
        assert got == {"stack_num": 2, "img_height": 64, "img_width": 64, "frame_skip": 3, "noop_max": 7}
        assert (c["use_fire_reset"], c["full_action_space"], c["reward_clip"], c["episodic_life"]) == (
            True,
            False,
            True,
            False,
        )
        assert c["repeat_action_probability"] == pytest.approx(0.25)
        assert c["max_episode_steps"] == 101  # ceil(301 / 3): ale-py ends the episode at that step too
        assert (c["seed"], c["num_envs"], c["batch_size"], c["num_threads"], c["thread_affinity_offset"]) == (
            11,
            4,
            2,
            1,
            0,
        )
        assert (env.obs_shape, env.num_actions, env.inference_batch) == ((2, 64, 64), 4, 2)
        pinned = [a for a in _affinities(set(os.listdir("/proc/self/task")) - before) if a == "0"]
        assert pinned == ["0"]  # its one stepping thread, on CPU 0 (another it starts is not pinned)
    finally:
        env.close()


def _play(env, seed: int, steps: int):
    """One env's observations, rewards and episode ends for fixed actions."""
    batch, obs, rewards, ends = env.reset(seed), [], [], []
    obs.append(batch.obs[0].copy())
    for t in range(steps):
        env.send(np.array([(t // 3) % env.num_actions]))
        batch = env.recv()
        obs.append(batch.obs[0].copy())
        rewards.append(float(batch.reward[0]))
        ends.append(bool(batch.done[0]))
    env.close()
    return np.stack(obs), rewards, [t + 1 for t, d in enumerate(ends) if d]


def test_both_engines_play_the_same_game_frame_for_frame():
    """Breakout with one no-op at reset on both (ale-py draws 0..noop_max and seed 0 draws 1 here;
    EnvPool 1..noop_max): the same first episode, pixel for pixel (grey palette, max-pool,
    INTER_AREA resize, zeros before an episode's first frame), the same rewards, and the same
    ends (200-step episodes, the next one's first observation with the step that ended one)."""
    kw = dict(id="breakout", noop_max=1, max_episode_frames=800)
    ale_obs, ale_r, ale_ends = _play(make("ale", 1, 0, seed=0, threads=1, **kw), 0, 210)
    pool_obs, pool_r, pool_ends = _play(make("envpool", 1, 0, seed=0, threads=1, **kw), 0, 210)
    assert ale_ends == pool_ends == [200]
    assert np.array_equal(ale_obs[:200], pool_obs[:200])  # obs 200 opens episode 2: its no-ops are drawn anew
    assert ale_r == pool_r and sum(ale_r) > 0  # the fixed actions score


@pytest.fixture(scope="module")
def envpool_lock_step():
    env = make("envpool", 4, 0, seed=9, **PONG)
    try:
        return _episodes(env, 9)
    finally:
        env.close()


def test_envpool_ends_an_episode_on_the_step_that_ends_it_in_partial_batches_as_in_lock_step(envpool_lock_step):
    """EnvPool resets an ended env on its next step; the family hands the actors the next
    episode's first observation with the ending step's reward and done (same-step), in lock-step
    and in partial batches (2 of 4 envs per recv()), where each env plays the same episodes."""
    ends = [t for steps in envpool_lock_step.values() for t, (_, _, d) in enumerate(steps) if d]
    assert sorted(set(ends)) == [5, 10]  # 20-frame episodes: 5 steps, the 5th returns the next one's start
    env = make("envpool", 4, 2, seed=9, **PONG)
    try:
        assert _episodes(env, 9) == envpool_lock_step
    finally:
        env.close()


@pytest.mark.parametrize("engine", ["ale", "envpool"])
def test_a_fixed_seed_fixes_each_engines_episodes(engine):
    """Two new envs, one seed: the same episodes (sticky actions and no-op draws seeded); another
    seed: others. An EnvPool env reset again, or with another seed, is made anew with it."""
    runs = []
    for seed in (3, 3, 4):
        env = make(engine, 4, 2, seed=seed, **PONG)
        try:
            runs.append(_episodes(env, seed))
        finally:
            env.close()
    assert runs[0] == runs[1] != runs[2]
    env = make(engine, 4, 0, seed=3, **PONG)  # lock-step: each env plays what it plays in partial batches
    try:
        assert _episodes(env, 3) == runs[0]
        assert _episodes(env, 3) == runs[0]  # reset again: EnvPool's generators have moved on, so made anew
        assert _episodes(env, 4) == runs[2]
    finally:
        env.close()


def test_an_envpool_env_is_not_kept_for_the_next_job():
    from rlbench.envs.shelf import EnvShelf

    env = make("envpool", 2, 0, seed=1, id="pong")
    assert not env.settle()
    assert not EnvShelf().shelve(("k",), env, 2)  # closed: the next job makes its own


def test_an_atari_job_on_ale_keeps_the_identity_it_had_before_the_engine_existed():
    """config_hash and the dataset digest of an ale-py job leave env.engine out (ADDED_FIELDS),
    so they equal a record's from before the key; an EnvPool job's differ."""
    from dataclasses import asdict, replace

    from rlbench.core.env_families import without_added_fields
    from rlbench.prepare.compose import compose_job
    from rlbench.tracking.dataset import env_dataset
    from rlbench.tracking.store import config_hash

    conf = compose_job(["env=pong"])
    assert conf.env.engine == "ale" and "engine" not in without_added_fields(asdict(conf.env))
    pooled = replace(conf, env=replace(conf.env, engine="envpool"))
    assert config_hash(pooled) != config_hash(conf)
    assert env_dataset(pooled.env).digest != env_dataset(conf.env).digest
    assert without_added_fields(asdict(pooled.env))["engine"] == "envpool"


BLOCK_ENVPOOL = """
    import sys

    class _NoEnvPool:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("envpool", "envpool_assets"):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, _NoEnvPool())
"""


@pytest.mark.e2e  # the real command, in a process of its own
@pytest.mark.parametrize(
    "args,expect",
    [
        (["env.engine=gym"], "env.engine='gym': allowed: one of ale, envpool"),
        (["env.engine=envpool", "env.noop_max=0"], "env.noop_max=0: allowed: an integer >= 1 with env.engine=envpool"),
        (["env.engine=envpool", "env.episodic_life=true"], "env.episodic_life=True: allowed: false with env.engine"),
        (["env.engine=envpool", "BLOCK"], "env.engine='envpool': allowed: ale; envpool is not available here"),
    ],
    ids=["unknown-engine", "noop-max-0", "episodic-life", "not-installed"],
)
def test_what_an_engine_cannot_run_is_refused_before_any_work(args, expect, tmp_path):
    extra: dict = {}
    if "BLOCK" in args:  # this interpreter finds no envpool, as on a platform without its wheel
        (tmp_path / "sitecustomize.py").write_text(textwrap.dedent(BLOCK_ENVPOOL))
        extra["PYTHONPATH"], args = str(tmp_path), [a for a in args if a != "BLOCK"]
    store = [f"tracking.uri=sqlite:///{tmp_path}/never.db", f"hydra.run.dir={tmp_path}/out"]
    p = rlbench_cli(["env=pong", *args, *store], extra_env=extra)
    assert p.returncode == 2, p.stderr[-2000:]
    assert expect in p.stderr
    assert not (tmp_path / "never.db").exists() and not (tmp_path / "out").exists()  # no run, no folder


def test_the_trainer_steps_envpool_in_partial_batches_and_counts_its_episodes(compose_cfg):
    """The same trainer on EnvPool: 4 actors in SEED's auto batch (2 of 4 per recv(); algo=random
    has no eval envs: the R2D2 smoke job below has them), 20-frame episodes: they end and are
    counted, 5 steps each; the env is closed at the end, not kept."""
    from rlbench.core.observers import JobObserver
    from rlbench.envs.shelf import SHELF
    from rlbench.prepare.plan import plan_job
    from rlbench.prepare.validate import validate
    from rlbench.train.trainer import train

    class Episodes(JobObserver):
        def __init__(self):
            self.seen = {True: [], False: []}

        def episode(self, ret, frames, evaluation):
            self.seen[evaluation].append(ret)

    overrides = ["env=pong", "env.engine=envpool", "env.max_episode_frames=20", "algo=random", "actors=4"]
    conf = validate(compose_cfg([*overrides, "workload.frames=2000", "telemetry.enabled=false", "progress=log"]))
    assert plan_job(conf).envs.inference_batch == 2
    watch = Episodes()
    train(plan_job(conf), [watch])
    assert len(watch.seen[False]) >= 4 * 2
    assert len(SHELF) == 0


@pytest.mark.e2e
@pytest.mark.parametrize("engine,procs", [("ale", 0), ("envpool", 0), ("envpool", 2)])
def test_an_r2d2_pong_smoke_job_runs_on_each_engine(engine, procs, compose_cfg, store):
    """R2D2 on Pong, a smoke job: on ale-py, on EnvPool in-process and in 2 actor processes over
    gRPC; it finishes, logs its envs' part of the start and counts ended (100-step) episodes."""
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job
    from tests.conftest import runs

    small = ["algo.batch_size=8", "algo.min_replay=10", "algo.network.lstm_hidden=32", "env.max_episode_frames=400"]
    job = [f"env.engine={engine}", *small, "actors=4", f"actor_procs={procs}"]
    run_job(job_of(compose_cfg(["workload=smoke", *job, "progress=log", *store["overrides"]]), job))
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED"
    # an ale-py job records as before the knob (tracking/record.py as_recorded); an EnvPool job names it
    assert run.data.params.get("env.engine") == (None if engine == "ale" else engine)
    assert run.data.metrics["episodes"] > 0 and "loss" in run.data.metrics
    if procs == 0:  # actor processes make their own envs: no envs part of the job's start
        assert run.data.metrics["job_start_envs_s"] > 0
