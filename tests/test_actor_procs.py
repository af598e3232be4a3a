"""A job's actors in other processes (actor_procs, actor_server.*; rlbench/remote/job_actors.py): the
config's rules, the split of envs and threads, the env overrides an actor process composes,
and (e2e) real jobs whose envs step in actor processes: CartPole and Pong finish with their
contract metrics, a process killed mid-job is a disconnect the job survives, a process that
cannot start fails the job at once, a hand-started process killed mid-job is replaced (its
rejoin counted, the per-process telemetry, hosts and timeline recorded), a job whose every
process is gone fails after the idle timeout, and no actor process outlives a killed job."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from rlbench.config.rules import ConfigError
from rlbench.prepare.compose import compose_job
from rlbench.prepare.plan import envs_of, local_actor_threads
from rlbench.prepare.validate import validate
from rlbench.remote.job_actors import env_overrides, split
from rlbench.tracking.store import config_hash
from tests.conftest import CARTPOLE_TINY, ROOT, OnTick, runs, wait_until


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


@pytest.mark.parametrize(
    "overrides",
    [["env=pong"], ["env=breakout", "env.sticky_actions=0.25", "env.max_episode_frames=1000"], ["env=cartpole"]],
)
def test_an_actor_process_composes_the_jobs_env_again(overrides):
    job = compose_job(overrides, host=False).env
    again = compose_job(env_overrides(job), host=False).env
    assert dataclasses.asdict(again) == dataclasses.asdict(job)


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["actor_procs=-1"], "actor_procs=-1: allowed: 0 (the envs step in the job's process)"),
        (
            ["actors=2", "eval_envs=1", "actor_procs=4"],
            "at least one env per actor process and actor task (actor_procs + actor_hosts <= 3)",
        ),
        (["actors=4", "eval_envs=0", "actor_server.remote_envs=2"], "2 of the 4 envs would have no actor process"),
        (["actors=4", "eval_envs=0", "actor_server.remote_envs=4"], "allowed: actor_server.bind=HOST:PORT"),
        (
            ["actor_procs=1", "actor_server.bind=0.0.0.0:7000"],
            "needs a token in the environment variable RLBENCH_ACTOR_TOKEN",
        ),
        (["actor_procs=1", "actor_server.join_timeout_s=0"], "actor_server.join_timeout_s=0.0: allowed: seconds > 0"),
    ],
)
def test_actor_process_settings_are_refused_naming_key_value_and_rule(compose_cfg, monkeypatch, overrides, says):
    monkeypatch.delenv("RLBENCH_ACTOR_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=None) as e:
        validate(compose_cfg(["env=cartpole", *overrides]), host=False)
    assert says in str(e.value)


def test_remote_hosts_with_a_token_pass(compose_cfg, monkeypatch):
    monkeypatch.setenv("RLBENCH_ACTOR_TOKEN", "s3cret")
    conf = validate(
        compose_cfg(
            [
                "env=cartpole",
                "actors=4",
                "eval_envs=0",
                "actor_procs=1",
                "actor_server.remote_envs=2",
                "actor_server.bind=0.0.0.0:7000",
            ]
        ),
        host=False,
    )
    assert conf.actor_server.remote_envs == 2


def test_the_plan_counts_every_processs_threads_and_batches_across_processes(compose_cfg):
    conf = validate(compose_cfg(["env=cartpole", "actors=40", "actor_procs=2"]), host=False)
    planned = envs_of(conf, cores=2)
    # gym steps on one thread in-process, in lock-step; two processes: one thread each, and central
    # inference takes the first ready process's envs (SEED's auto: half of the 42)
    assert planned.actor_threads == 2 and planned.inference_batch == 21
    inproc = envs_of(validate(compose_cfg(["env=cartpole", "actors=40"]), host=False), cores=2)
    assert inproc.actor_threads == 1 and inproc.inference_batch == 42


def test_atari_processes_share_the_jobs_actor_threads_and_gym_processes_take_one_each(compose_cfg):
    """Each local process gets its family's whole pool on the job's CPUs (LocalActors): Atari's
    pools share the actor_threads (or every CPU), so the hardware threads stay those of an
    in-process job; gym's processes step on one thread each, at most one per CPU."""

    def threads(overrides, cores):
        return envs_of(validate(compose_cfg(overrides), host=False), cores=cores).actor_threads

    assert threads(["env=pong", "actors=40", "actor_procs=2"], cores=2) == 2
    assert threads(["env=pong", "actors=40", "actor_procs=4", "actor_threads=3"], cores=8) == 3
    assert threads(["env=pong", "actors=40", "actor_threads=3"], cores=8) == 3  # in-process: the same
    assert threads(["env=cartpole", "actors=40", "actor_procs=8"], cores=4) == 4
    assert threads(["env=cartpole", "actors=40", "actor_procs=3"], cores=4) == 3
    assert local_actor_threads(pool=1, procs=3, cpus=2) == 2 and local_actor_threads(pool=4, procs=2, cpus=4) == 4


def test_in_process_jobs_keep_their_config_hash(compose_cfg):
    """Runs recorded before actor_procs existed are still found by resume=true."""
    conf = validate(compose_cfg(["env=cartpole"]), host=False)
    d = dataclasses.asdict(conf)
    for key in (
        "tracking",
        "progress",
        "resume",
        "repeats",
        "dry_run",
        "verdict",
        "sweep",
        "pack",
        "packing",
        "actor_procs",
        "actor_hosts",
        "actor_launch",
        "actor_server",
        "precision",
        "hot_path",  # eager everywhere: left out, as before the key existed
    ):
        d.pop(key)
    import hashlib
    import json

    assert config_hash(conf) == hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert config_hash(validate(compose_cfg(["env=cartpole", "actor_procs=2"]), host=False)) != config_hash(conf)
    assert config_hash(validate(compose_cfg(["env=cartpole", "actor_hosts=2"]), host=False)) != config_hash(conf)


@pytest.mark.e2e
def test_a_cartpole_job_with_two_actor_processes_is_recorded(compose_cfg, store):
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job

    cfg = compose_cfg([*CARTPOLE_TINY, "actors=8", "actor_procs=2", "progress=log", *store["overrides"]])
    final = run_job(job_of(cfg, ["actor_procs=2"]))
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED" and run.data.params["actor_procs"] == "2"
    assert final["frames"] >= 3000 and final["learner_updates"] == 2
    assert final["actor_disconnects"] == 0 and final["actor_lost_steps"] == 0
    # 8 envs (the store fixture sets eval_envs=0) in 2 processes of 4: a forward takes one process's step
    assert final["actor_threads_used"] == 2 and final["inference_batch_mean"] == pytest.approx(4.0, abs=0.01)
    # the processes' own measurements (their Reports, once a second) and the wire's
    assert 0 < final["wire_bytes_per_step"] < 200  # CartPole: 4 floats, a reward, a flag, an action
    if final["runtime_s"] > 1.5:  # a report came (each process reports once a second)
        assert (
            final["rpc_rtt_ms"] > 0
            and final["rpc_rtt_ms_p99"] >= final["rpc_rtt_ms"]
            and final["actor_procs_cpu_s"] > 0
        )
    assert actor_children() == []


@pytest.mark.e2e
def test_a_pong_job_with_two_actor_processes_logs_its_contract_metrics(compose_cfg, store):
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job
    from tests.test_trainer import CONTRACT

    # the contract, not the learner: a small R2D2 (batch 8, LSTM 32); the smoke task's frames end an episode
    cfg = compose_cfg(
        [
            "workload=smoke",
            "algo.batch_size=8",
            "algo.min_replay=10",
            "algo.network.lstm_hidden=32",
            "actors=4",
            "actor_procs=2",
            "progress=log",
            *store["overrides"],
        ]
    )
    run_job(job_of(cfg, ["actor_procs=2"]))
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED"
    for key in CONTRACT:
        assert key in run.data.metrics, key
    m = run.data.metrics  # a smoke Pong job runs for seconds: the processes reported
    assert 84 * 84 < m["wire_bytes_per_step"] <= 7500 and m["rpc_rtt_ms"] > 0 and m["actor_procs_cpu_s"] > 0
    assert actor_children() == []


@pytest.mark.e2e
def test_an_actor_process_killed_mid_job_is_a_disconnect_the_job_survives(compose_cfg, store):
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job

    killed = []

    def kill_one(values: dict, step: int) -> None:  # the job's tick: once stepping, SIGKILL one actor process
        if not killed and values.get("frames", 0) > 0:
            victim = actor_children()[0]
            victim.send_signal(signal.SIGKILL)
            killed.append(victim.pid)

    cfg = compose_cfg(
        [
            "env=cartpole",
            "algo=random",
            "workload=smoke",
            "workload.frames=60000",
            "actors=8",
            "actor_procs=2",
            "tracking.log_every_s=1",
            "progress=log",
            *store["overrides"],
        ]
    )
    final = run_job(job_of(cfg, ["actor_procs=2"]), [OnTick(kill_one)])
    assert killed and final["actor_disconnects"] == 1
    assert final["frames"] >= 60000  # the other process stepped the task to its end
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED" and run.data.metrics["actor_disconnects"] == 1
    assert actor_children() == []


@pytest.mark.e2e
def test_an_actor_process_that_cannot_start_fails_the_job_at_once(compose_cfg, store, monkeypatch):
    import time

    from rlbench.prepare.job import job_of
    from rlbench.remote import job_actors as remote_job
    from rlbench.train.job import run_job

    monkeypatch.setattr(remote_job, "env_overrides", lambda env: ["env=pong"])  # a spec the job refuses
    cfg = compose_cfg([*CARTPOLE_TINY, "actors=4", "actor_procs=1", "progress=log", *store["overrides"]])
    t0 = time.monotonic()
    with pytest.raises(Exception, match="actor process 0 .* exited with 2 before its envs joined"):
        run_job(job_of(cfg, ["actor_procs=1"]))
    assert time.monotonic() - t0 < 60  # not the join timeout (120 s)
    (run,) = runs(store["uri"])
    assert run.info.status == "FAILED"


@pytest.mark.e2e
def test_every_actor_process_is_gone_within_10_s_of_a_killed_job(store, tmp_path):
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbench",
            "env=cartpole",
            "algo=random",
            "workload=smoke",
            "workload.frames=100000000",
            "actors=4",
            "actor_procs=2",
            "progress=log",
            *store["overrides"],
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
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


class _HubLog(logging.Handler):
    """The job's hub log lines (rlbench/remote/hub.py: joins, waits, losses), as events to wait on."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self.changed:
            self.lines.append(record.getMessage())
            self.changed.notify_all()

    def wait_for(self, words: str, timeout_s: float) -> str:
        with self.changed:
            found = self.changed.wait_for(lambda: next((x for x in self.lines if words in x), None), timeout_s)
        assert found, f"no hub log line with {words!r} within {timeout_s} s: {self.lines}"
        return found


@pytest.fixture
def hub_log():
    logger, handler = logging.getLogger("rlbench.remote.hub"), _HubLog()
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def _hand_started_actor(server: str, envs: int, *overrides: str) -> psutil.Popen:
    """`python -m rlbench.actor` as a user starts it on another host (here: this one)."""
    return psutil.Popen(
        [sys.executable, "-m", "rlbench.actor", "--server", server, "--envs", str(envs), *overrides],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.e2e
def test_a_hand_started_actor_killed_mid_job_is_replaced_and_the_job_ends_exact(compose_cfg, store, tmp_path, hub_log):
    """A job whose 4 envs come from 2 processes started by hand (actor_server.bind, remote_envs):
    one is SIGKILLed mid-job and a new one started for its envs rejoins. The survivor is held
    (SIGSTOP) from before the kill until the new process waits for the freed ids, so the rejoin
    happens mid-job whatever the machine's speed; the events are the hub's log lines."""
    import json

    import mlflow

    from rlbench.core.resources import cpu_model
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job

    frames, sock = 60_000, tmp_path / "job.sock"
    server = f"unix:{sock}"
    cfg = compose_cfg(
        [
            "env=cartpole",
            "algo=random",
            "workload=smoke",
            f"workload.frames={frames}",
            "actors=4",
            "actor_server.remote_envs=4",
            f"actor_server.bind={server}",
            "tracking.log_every_s=1",
            "progress=log",
            *store["overrides"],
        ]
    )
    started: list[psutil.Popen] = []

    def start_two() -> None:  # once the job listens
        wait_until(sock.exists, 120, "the job's actor socket")
        started.extend(_hand_started_actor(server, 2, "env=cartpole") for _ in range(2))

    threading.Thread(target=start_two, daemon=True).start()
    replaced: dict[str, psutil.Popen] = {}

    def kill_and_replace(values: dict, step: int) -> None:  # the job's tick (its main thread)
        if replaced or values.get("frames", 0) == 0:
            return
        victim, survivor = started
        survivor.send_signal(signal.SIGSTOP)  # the job now waits for its next step
        victim.send_signal(signal.SIGKILL)
        hub_log.wait_for(f"lost: 2 envs from {socket.gethostname()} (pid {victim.pid})", 30)
        replaced.update(victim=victim, survivor=survivor, new=_hand_started_actor(server, 2, "env=cartpole"))
        # it waits for the range, or joins at once where the job took the loss with a step already in hand
        hub_log.wait_for(f"(pid {replaced['new'].pid})", 120)
        survivor.send_signal(signal.SIGCONT)  # its step lets the job take the loss; the new one joins

    try:
        final = run_job(job_of(cfg, ["actor_server.remote_envs=4"]), [OnTick(kill_and_replace)])
        assert [p.wait(timeout=30) for p in (replaced["survivor"], replaced["new"])] == [0, 0]
    finally:
        for p in {p.pid: p for p in started + list(replaced.values())}.values():
            if p.poll() is None:  # a failed test's: killed, and reaped
                p.kill()
                p.wait(timeout=30)
    new = replaced["new"]
    assert hub_log.wait_for(f"(pid {new.pid}) at ids", 0).endswith("(rejoin 1)")
    assert final["frames"] == frames  # whole 2-env Steps: the target exactly, lost steps counted as stepped
    assert final["actor_disconnects"] == 1 and final["actor_rejoins"] == 1 and final["actor_refused"] == 0
    (run,) = runs(store["uri"])
    m = run.data.metrics
    assert run.info.status == "FINISHED" and m["actor_rejoins"] == 1 and m["actor_disconnects"] == 1
    # the processes that last held the envs: the survivor and the new one, 1 thread each, on this host
    assert final["actor_threads_used"] == 2 and m["cpu_gpu_ratio"] == final["cpu_gpu_ratio"] == 2 / m["sm_granted"]
    # per process: the new one is actor_proc2 (the third to join) and reported
    assert 0 < m["op_frac/actor_proc2/env_step"] < 1 and 0 < m["op_frac/actor_proc2/wait_actions"] < 1
    assert m["actor_proc2/cpu_s"] > 0 and 0 < m["actor_proc2/bytes_sent_per_step"] < 200
    assert m["op_frac/actor_procs/env_step"] + m["op_frac/actor_procs/wait_actions"] <= 1
    host = socket.gethostname()
    assert run.data.tags["actor_hosts"].startswith(f"{host}: {os.cpu_count()} HW threads, ")
    assert "3 processes, 2 of 2 threads counted" in run.data.tags["actor_hosts"]
    client = mlflow.MlflowClient(store["uri"])
    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "actors/processes.json", str(tmp_path))).read_text()
    )
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["data"]]
    assert [(r["process"], r["pid"], r["connected"]) for r in rows] == [
        (f"actor_proc{i}", p.pid, p is not replaced["victim"])
        for i, p in enumerate(sorted(started, key=lambda p: p.pid != rows[0]["pid"]) + [new])
    ]
    hosts = json.loads(Path(client.download_artifacts(run.info.run_id, "actors/hosts.json", str(tmp_path))).read_text())
    assert [dict(zip(hosts["columns"], r, strict=True)) for r in hosts["data"]] == [
        {
            "host": host,
            "hardware_threads": os.cpu_count(),
            "cpu_model": cpu_model(),
            "processes": 3,
            "tasks": None,  # processes started by hand, not actor tasks (actor_hosts)
            "pids": " ".join(str(r["pid"]) for r in rows),
            "threads_declared": 2,
            "threads_counted": 2,
        }
    ]
    # the timeline: one track per process that reported, named with its host and pid
    trace = json.loads(
        Path(client.download_artifacts(run.info.run_id, "telemetry/trace.json", str(tmp_path))).read_text()
    )
    names = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    tid = names[f"actor process 2 ({host}, pid {new.pid})"]
    ops = {e["name"] for e in trace["traceEvents"] if e.get("tid") == tid and e["ph"] == "X"}
    assert ops == {"env_step", "wait_actions"}
    assert "an estimate" in trace["rlbench"]["tracks"]["actor_proc2"]["note"]
    assert actor_children() == []


@pytest.mark.e2e
def test_a_jobs_only_actor_process_killed_and_started_again_rejoins(compose_cfg, store, tmp_path, hub_log):
    """Nothing else steps while the only process is gone: the job cannot take the loss until a
    new process joins, so it hands the ids out at once and learns of the loss with its first step."""
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job

    frames, sock = 20_000, tmp_path / "job.sock"
    server = f"unix:{sock}"
    cfg = compose_cfg(
        [
            "env=cartpole",
            "algo=random",
            "workload=smoke",
            f"workload.frames={frames}",
            "actors=2",
            "actor_server.remote_envs=2",
            f"actor_server.bind={server}",
            "actor_server.idle_timeout_s=30",
            "tracking.log_every_s=1",
            "progress=log",
            *store["overrides"],
        ]
    )
    started: list[psutil.Popen] = []

    def start_one() -> None:
        wait_until(sock.exists, 120, "the job's actor socket")
        started.append(_hand_started_actor(server, 2, "env=cartpole"))

    threading.Thread(target=start_one, daemon=True).start()

    def kill_and_restart(values: dict, step: int) -> None:
        if len(started) == 1 and values.get("frames", 0) > 0:
            started[0].send_signal(signal.SIGKILL)
            hub_log.wait_for(f"(pid {started[0].pid}) at ids 0..1", 0)
            hub_log.wait_for(f"lost: 2 envs from {socket.gethostname()} (pid {started[0].pid})", 30)
            started.append(_hand_started_actor(server, 2, "env=cartpole"))

    try:
        final = run_job(job_of(cfg, ["actor_server.remote_envs=2"]), [OnTick(kill_and_restart)])
        assert started[1].wait(timeout=30) == 0
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    assert hub_log.wait_for(f"(pid {started[1].pid}) at ids 0..1", 0).endswith("(rejoin 1)")
    assert final["frames"] == frames and final["actor_disconnects"] == 1 and final["actor_rejoins"] == 1
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED" and run.data.metrics["actor_threads_used"] == 1


@pytest.mark.e2e
def test_a_job_whose_every_actor_process_is_gone_fails_after_the_idle_timeout(compose_cfg, store):
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job

    killed = []

    def kill_all(values: dict, step: int) -> None:
        if not killed and values.get("frames", 0) > 0:
            for p in actor_children():
                p.send_signal(signal.SIGKILL)
                killed.append(p.pid)

    cfg = compose_cfg(
        [
            "env=cartpole",
            "algo=random",
            "workload=smoke",
            "workload.frames=100000000",
            "actors=4",
            "actor_procs=2",
            "actor_server.idle_timeout_s=2",
            "tracking.log_every_s=1",
            "progress=log",
            *store["overrides"],
        ]
    )
    with pytest.raises(Exception, match=r"no actor process has been connected for 2 s \(2 disconnected\)"):
        run_job(job_of(cfg, ["actor_procs=2"]), [OnTick(kill_all)])
    assert len(killed) == 2
    (run,) = runs(store["uri"])
    assert run.info.status == "FAILED" and "no actor process has been connected for 2 s" in run.data.tags["error"]
