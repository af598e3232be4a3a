"""A job's actors in other processes (actor_procs, actor_server.*; rlbench/remote/job.py): the
config's rules, the split of envs and threads, the env overrides an actor process composes,
and (e2e) real jobs whose envs step in actor processes: CartPole and Pong finish with their
contract metrics, a process killed mid-job is a disconnect the job survives, a process that
cannot start fails the job at once, and no actor process outlives a killed job."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys

import psutil
import pytest

from rlbench.config.compose import compose_job
from rlbench.config.validate import ConfigError, validate
from rlbench.plan import envs_of
from rlbench.remote.job import env_overrides, split
from rlbench.tracking.store import config_hash
from tests.conftest import CARTPOLE_TINY, ROOT, runs, wait_until


def actor_children(pid: int | None = None) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in kids if _is_actor(p)]


def _is_actor(p: psutil.Process) -> bool:
    try:
        return "rlbench.actor" in p.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False


def test_envs_split_as_evenly_as_can_be():
    assert split(42, 4) == [11, 11, 10, 10] and split(3, 3) == [1, 1, 1] and sum(split(258, 4)) == 258
    with pytest.raises(ValueError, match="cannot split 2 envs over 3"):
        split(2, 3)


@pytest.mark.parametrize("overrides", [["env=pong"], ["env=breakout", "env.sticky_actions=0.25",
                                                      "env.max_episode_frames=1000"], ["env=cartpole"]])
def test_an_actor_process_composes_the_jobs_env_again(overrides):
    job = compose_job(overrides, host=False).env
    again = compose_job(env_overrides(job), host=False).env
    assert dataclasses.asdict(again) == dataclasses.asdict(job)


@pytest.mark.parametrize("overrides, says", [
    (["actor_procs=-1"], "actor_procs=-1: allowed: 0 (the envs step in the job's process)"),
    (["actors=2", "eval_envs=1", "actor_procs=4"], "at least one env per actor process (actor_procs <= 3)"),
    (["actors=4", "eval_envs=0", "actor_server.remote_envs=2"], "2 of the 4 envs would have no actor process"),
    (["actors=4", "eval_envs=0", "actor_server.remote_envs=4"], "allowed: actor_server.bind=HOST:PORT"),
    (["actor_procs=1", "actor_server.bind=0.0.0.0:7000"], "needs a token in the environment variable RLBENCH_ACTOR_TOKEN"),
    (["actor_procs=1", "actor_server.join_timeout_s=0"], "actor_server.join_timeout_s=0.0: allowed: seconds > 0"),
])
def test_actor_process_settings_are_refused_naming_key_value_and_rule(compose_cfg, monkeypatch, overrides, says):
    monkeypatch.delenv("RLBENCH_ACTOR_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=None) as e:
        validate(compose_cfg(["env=cartpole", *overrides]), host=False)
    assert says in str(e.value)


def test_remote_hosts_with_a_token_pass(compose_cfg, monkeypatch):
    monkeypatch.setenv("RLBENCH_ACTOR_TOKEN", "s3cret")
    conf = validate(compose_cfg(["env=cartpole", "actors=4", "eval_envs=0", "actor_procs=1",
                                 "actor_server.remote_envs=2", "actor_server.bind=0.0.0.0:7000"]), host=False)
    assert conf.actor_server.remote_envs == 2


def test_the_plan_counts_every_processs_threads_and_batches_across_processes(compose_cfg):
    conf = validate(compose_cfg(["env=cartpole", "actors=40", "actor_procs=2"]), host=False)
    planned = envs_of(conf, cores=2)
    # gym steps on one thread in-process, in lock-step; two processes: one thread each, and central
    # inference takes the first ready process's envs (SEED's auto: half of the 42)
    assert planned.actor_threads == 2 and planned.inference_batch == 21
    inproc = envs_of(validate(compose_cfg(["env=cartpole", "actors=40"]), host=False), cores=2)
    assert inproc.actor_threads == 1 and inproc.inference_batch == 42


def test_in_process_jobs_keep_their_config_hash(compose_cfg):
    """Runs recorded before actor_procs existed are still found by resume=true."""
    conf = validate(compose_cfg(["env=cartpole"]), host=False)
    d = dataclasses.asdict(conf)
    for key in ("tracking", "progress", "resume", "repeats", "actor_procs", "actor_server", "precision"):
        d.pop(key)
    import hashlib
    import json

    assert config_hash(conf) == hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert config_hash(validate(compose_cfg(["env=cartpole", "actor_procs=2"]), host=False)) != config_hash(conf)


@pytest.mark.e2e
def test_a_cartpole_job_with_two_actor_processes_is_recorded(compose_cfg, store):
    from rlbench.job import run_job

    cfg = compose_cfg([*CARTPOLE_TINY, "actors=8", "actor_procs=2", "progress=log", *store["overrides"]])
    final = run_job(cfg, overrides=["actor_procs=2"])
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED" and run.data.params["actor_procs"] == "2"
    assert final["frames"] >= 3000 and final["learner_updates"] == 2
    assert final["actor_disconnects"] == 0 and final["actor_lost_steps"] == 0
    # 8 envs (the store fixture sets eval_envs=0) in 2 processes of 4: a forward takes one process's step
    assert final["actor_threads_used"] == 2 and final["inference_batch_mean"] == pytest.approx(4.0, abs=0.01)
    # the processes' own measurements (their Reports, once a second) and the wire's
    assert 0 < final["wire_bytes_per_step"] < 200  # CartPole: 4 floats, a reward, a flag, an action
    if final["runtime_s"] > 1.5:  # a report came (each process reports once a second)
        assert final["rpc_rtt_ms"] > 0 and final["rpc_rtt_ms_p99"] >= final["rpc_rtt_ms"] and final["actor_procs_cpu_s"] > 0
    assert actor_children() == []


@pytest.mark.e2e
def test_a_pong_job_with_two_actor_processes_logs_its_contract_metrics(compose_cfg, store):
    from rlbench.job import run_job
    from tests.test_trainer import CONTRACT

    cfg = compose_cfg(["workload=smoke", "actors=4", "actor_procs=2", "progress=log", *store["overrides"]])
    run_job(cfg, overrides=["actor_procs=2"])
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED"
    for key in CONTRACT:
        assert key in run.data.metrics, key
    m = run.data.metrics  # a smoke Pong job runs for seconds: the processes reported
    assert 84 * 84 < m["wire_bytes_per_step"] <= 7500 and m["rpc_rtt_ms"] > 0 and m["actor_procs_cpu_s"] > 0
    assert actor_children() == []


@pytest.mark.e2e
def test_an_actor_process_killed_mid_job_is_a_disconnect_the_job_survives(compose_cfg, store):
    from rlbench.job import run_job

    killed = []

    def kill_one(values: dict, step: int) -> None:  # the job's tick: once stepping, SIGKILL one actor process
        if not killed and values.get("frames", 0) > 0:
            victim = actor_children()[0]
            victim.send_signal(signal.SIGKILL)
            killed.append(victim.pid)

    cfg = compose_cfg(["env=cartpole", "algo=random", "workload=smoke", "workload.frames=200000", "actors=8",
                       "actor_procs=2", "tracking.log_every_s=1", "progress=log", *store["overrides"]])
    final = run_job(cfg, overrides=["actor_procs=2"], on_tick=kill_one)
    assert killed and final["actor_disconnects"] == 1
    assert final["frames"] >= 200000  # the other process stepped the task to its end
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED" and run.data.metrics["actor_disconnects"] == 1
    assert actor_children() == []


@pytest.mark.e2e
def test_an_actor_process_that_cannot_start_fails_the_job_at_once(compose_cfg, store, monkeypatch):
    import time

    from rlbench.job import run_job
    from rlbench.remote import job as remote_job

    monkeypatch.setattr(remote_job, "env_overrides", lambda env: ["env=pong"])  # a spec the job refuses
    cfg = compose_cfg([*CARTPOLE_TINY, "actors=4", "actor_procs=1", "progress=log", *store["overrides"]])
    t0 = time.monotonic()
    with pytest.raises(Exception, match="actor process 0 .* exited with 2 before its envs joined"):
        run_job(cfg, overrides=["actor_procs=1"])
    assert time.monotonic() - t0 < 60  # not the join timeout (120 s)
    (run,) = runs(store["uri"])
    assert run.info.status == "FAILED"


@pytest.mark.e2e
def test_every_actor_process_is_gone_within_10_s_of_a_killed_job(store, tmp_path):
    job = subprocess.Popen([sys.executable, "-m", "rlbench", "env=cartpole", "algo=random", "workload=smoke",
                            "workload.frames=100000000", "actors=4", "actor_procs=2", "progress=log",
                            *store["overrides"]], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        wait_until(lambda: len(actor_children(job.pid)) == 2, 120, "two actor processes started by the job")
        actors = actor_children(job.pid)
        job.send_signal(signal.SIGKILL)
        job.wait(30)
        _, alive = psutil.wait_procs(actors, timeout=10)
        assert alive == [], f"actor processes outlived the job by 10 s: {[p.pid for p in alive]}"
    finally:
        job.kill()
        for p in actor_children(job.pid):
            p.kill()
