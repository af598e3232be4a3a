"""Actor tasks placed by submitit beside the learner (actor_hosts; rlbench/remote/tasks.py,
handoff.py, rlbench/sweeps/submission.py). No SLURM here: the sbatch path is tested by its dry-run
text (submitit's own), the placement by submitit's local executor running the same array as
processes of this host.

Fast: the address hand-off, the placement rule, the refusals, two tasks on one host kept
apart in the record while their threads count once, a task that fails before joining failing
the job by name, the dry-run text. e2e: a CartPole sweep job through hydra/launcher=local_submitit
with 2 actor tasks, recorded with both, the token nowhere in its files, no process left.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import psutil
import pytest

from rlbench.config.rules import ConfigError
from rlbench.config.schema import ActorLaunchConfig
from rlbench.core.address import TOKEN_ENV
from rlbench.prepare.plan import Placement, placement_for
from rlbench.prepare.validate import validate
from rlbench.remote.handoff import ADDRESS_FILE, ensure_token, reachable, read_address, write_address
from rlbench.remote.hub import Stream
from rlbench.remote.tasks import ActorTasks
from rlbench.remote.telemetry import counted_threads, host_rows, hosts_tag, process_rows
from tests.conftest import CARTPOLE_TINY, rlbench_cli, runs

TOKEN = "test-token-5f0c9e1d"  # a value the tests look for in every file the job and its tasks leave


def test_the_address_goes_through_a_file_whole_and_a_missing_one_is_named(tmp_path):
    path = write_address(tmp_path / "job", "node7:50123")
    assert path == tmp_path / "job" / ADDRESS_FILE and read_address(path, timeout_s=1) == "node7:50123"
    assert [p.name for p in path.parent.iterdir()] == [ADDRESS_FILE]  # nothing left aside
    with pytest.raises(TimeoutError, match=f"{tmp_path / 'none' / ADDRESS_FILE}: no actor server address after 0.1 s"):
        read_address(tmp_path / "none" / ADDRESS_FILE, timeout_s=0.1, poll_s=0.02)
    assert reachable("0.0.0.0:50123", host="node7") == "node7:50123"  # every interface: reached by the host's name
    assert reachable("10.0.0.5:50123", host="node7") == "10.0.0.5:50123"
    assert reachable("0.0.0.0:1").startswith(socket.gethostname())


def test_a_token_is_made_only_where_the_environment_has_none():
    env: dict[str, str] = {}
    assert ensure_token(env) and len(env[TOKEN_ENV]) >= 32
    made = env[TOKEN_ENV]
    assert not ensure_token(env) and env[TOKEN_ENV] == made
    other: dict[str, str] = {}
    ensure_token(other)
    assert other[TOKEN_ENV] != made


def test_the_launcher_decides_where_actor_tasks_go(tmp_path):
    slurm = placement_for("hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher", tmp_path)
    assert slurm == Placement("slurm", tmp_path)
    for other in (
        "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
        "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
        "",
    ):
        assert placement_for(other, tmp_path).executor == "local"  # one box: its processes


def test_every_actor_task_needs_an_env_and_tasks_bring_their_own_token(compose_cfg, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    base = ["env=cartpole", "actors=3", "eval_envs=0"]
    with pytest.raises(
        ConfigError, match=r"actor_procs=1 actor_hosts=3 .*steps 3 envs.*actor_procs \+ actor_hosts <= 3"
    ):
        validate(compose_cfg([*base, "actor_procs=1", "actor_hosts=3"]), host=False)
    conf = validate(compose_cfg([*base, "actor_hosts=3", "actor_server.bind=0.0.0.0:0"]), host=False)
    assert conf.actor_hosts == 3  # the job makes the token its tasks inherit
    with pytest.raises(ConfigError, match=f"needs a token in the environment variable {TOKEN_ENV}"):
        validate(
            compose_cfg(
                [*base, "actors=4", "actor_hosts=2", "actor_server.remote_envs=1", "actor_server.bind=0.0.0.0:5000"]
            ),
            host=False,
        )  # hand-started actors need yours
    with pytest.raises(ConfigError, match="actor_launch.cpus_per_task=0: allowed: an integer >= 1"):
        validate(compose_cfg([*base, "actor_hosts=1", "actor_launch.cpus_per_task=0"]), host=False)


@pytest.mark.parametrize("fails", ["listening", "placing"])
def test_a_token_made_for_a_jobs_tasks_leaves_the_environment_with_the_job(compose_cfg, monkeypatch, fails):
    """Made for this job's actor tasks, gone when the job closes (here: the server cannot listen,
    or the tasks cannot be placed, and the job closes what it started), so that a later job of
    the same process cannot take it for a token the user set; a token the user set stays."""
    from rlbench.envs.spec import env_spec
    from rlbench.remote.job_actors import JobActors

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    held = socket.socket()
    held.bind(("0.0.0.0", 0))
    held.listen()
    bind = f"0.0.0.0:{held.getsockname()[1]}" if fails == "listening" else "0.0.0.0:0"
    conf = validate(
        compose_cfg(["env=cartpole", "actors=2", "eval_envs=0", "actor_hosts=1", f"actor_server.bind={bind}"]),
        host=False,
    )
    seen: list[str | None] = []

    def no_placement(self, *args):
        seen.append(os.environ.get(TOKEN_ENV))
        raise RuntimeError("no executor here")

    monkeypatch.setattr(JobActors, "_place", no_placement)
    try:
        for user_token in (None, TOKEN):
            if user_token:
                monkeypatch.setenv(TOKEN_ENV, user_token)
            with pytest.raises(ConfigError if fails == "listening" else RuntimeError):
                JobActors(conf, env_spec(conf.env), 2)
            assert os.environ.get(TOKEN_ENV) == user_token
    finally:
        held.close()
    if fails == "placing":  # the tasks would have inherited a made token, then the user's
        assert len(seen) == 2 and seen[0] and seen[0] != TOKEN and seen[1] == TOKEN


def _stream(index: int, host: str, task: str, threads: int, host_threads: int) -> Stream:
    return Stream(
        first=index * 2,
        envs=2,
        threads=threads,
        host=host,
        pid=100 + index,
        run_id=index,
        index=index,
        host_threads=host_threads,
        cpu_model="EPYC",
        task=task,
    )


def test_two_tasks_on_one_host_stay_two_in_the_record_and_its_threads_count_once():
    streams = [_stream(0, "vm", "0", 2, 2), _stream(1, "vm", "1", 2, 2), _stream(2, "node9", "2", 8, 8)]
    assert [r["task"] for r in process_rows(streams)] == ["0", "1", "2"]
    hosts = host_rows(streams)
    assert [(h["host"], h["tasks"], h["processes"], h["threads_counted"]) for h in hosts] == [
        ("vm", "0 1", 2, 2),
        ("node9", "2", 1, 8),
    ]
    assert counted_threads(streams) == 10  # vm's 2 + 2 declared capped at its 2, node9's 8
    assert hosts_tag(hosts).startswith("vm: 2 HW threads, EPYC, 2 processes (actor tasks 0, 1), 2 of 4 threads counted")
    assert process_rows([_stream(0, "vm", "", 1, 2)])[0]["task"] is None  # a process no launcher placed


def test_a_task_that_ends_before_joining_fails_the_job_by_name_and_none_is_left(tmp_path):
    """A real local-executor array whose address file never appears: each task times out
    reading it; the watcher fails the job naming the task, its id, state and the file."""
    failed: list[str] = []
    got = threading.Event()

    def fail(reason: str) -> None:
        failed.append(reason)
        got.set()

    tasks = ActorTasks(
        "local",
        tmp_path / "actor-tasks",
        ActorLaunchConfig(timeout_min=2),
        [1, 1],
        ["env=cartpole"],
        tmp_path / ADDRESS_FILE,
        wait_s=0.5,
        fail=fail,
    )
    try:
        assert tasks.missing(joined={"1"}).startswith(f"actor tasks not joined: 0 ({tasks.jobs[0].job_id}: ")
        assert got.wait(60), "the watcher never reported the failed task"
    finally:
        tasks.stop(grace_s=5)
    assert len(failed) == 1
    assert failed[0].startswith("actor task ") and "(local job " in failed[0] and ") ended (state " in failed[0]
    assert f"TimeoutError: {tmp_path / ADDRESS_FILE}: no actor server address after 0.5 s" in failed[0]
    assert all(
        not psutil.pid_exists(int(j.job_id)) or psutil.Process(int(j.job_id)).status() == "zombie" for j in tasks.jobs
    )


def test_the_dry_run_prints_the_learners_and_the_actor_array_without_the_token(store, tmp_path, rlbench_main):
    args = [
        "-m",
        "hydra/launcher=slurm",
        "actor_hosts=4",
        "env=cartpole",
        "actor_launch.partition=cpu",
        "actor_launch.mem_gb=8",
        "hydra.launcher.partition=gpu",
        "dry_run=true",
        *store["overrides"],
    ]
    out = rlbench_main(args, extra_env={TOKEN_ENV: TOKEN})
    assert out.returncode == 0, out.stderr[-2000:]
    learners, _, actors = out.stdout.partition("its actor array, 4 tasks")
    for line in ("--array=0-0%1", "--partition=gpu", "--gpus-per-node=1", "--job-name=rlbench"):
        assert f"#SBATCH {line}\n" in learners, line
    for line in (
        "--array=0-3%4",
        "--partition=cpu",
        "--cpus-per-task=16",
        "--mem=8GB",
        "--time=120",
        "--job-name=rlbench-actors",
        f"--output={tmp_path}/multirun/0/actor-tasks/%A_%a_0_log.out",
    ):
        assert f"#SBATCH {line}\n" in actors, line
    assert "--gpus" not in actors  # CPU nodes
    assert "# envs per task: 10 10 10 10 (of 40: actors + eval envs" in actors
    assert f"writes HOST:PORT to {tmp_path}/multirun/0/{ADDRESS_FILE}" in actors
    assert TOKEN not in out.stdout + out.stderr and f"{TOKEN_ENV} in the learner's environment" in actors
    assert not (tmp_path / "multirun").exists() and runs(store["uri"]) == []  # nothing submitted, nothing recorded


def test_a_dry_run_needs_the_slurm_launcher_and_a_sweep(store, rlbench_main):
    out = rlbench_main(
        ["-m", "hydra/launcher=local_submitit", "actor_hosts=1", "env=cartpole", "dry_run=true", *store["overrides"]]
    )
    assert out.returncode == 2 and "dry_run=true: allowed with hydra/launcher=slurm only" in out.stderr
    out = rlbench_main(["actor_hosts=1", "env=cartpole", "dry_run=true", *store["overrides"]])
    assert out.returncode == 2 and "dry_run=true prints the SLURM submission of a sweep" in out.stderr


def _left_behind(marker: str) -> list[str]:
    """Processes whose command line names `marker` (the test's folder): the job's and its tasks'."""
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd and p.info["status"] != psutil.STATUS_ZOMBIE and p.pid != os.getpid():
            left.append(f"{p.pid}: {cmd[:200]}")
    return left


@pytest.mark.e2e
def test_a_cartpole_job_with_two_actor_tasks_through_the_local_executor(store, tmp_path):
    args = [
        "-m",
        "hydra/launcher=local_submitit",
        "actor_hosts=2",
        *CARTPOLE_TINY,
        "actors=2",
        "sm_limit=1",
        "progress=log",
        "telemetry.rate_hz=2",
        *store["overrides"],
    ]
    out = rlbench_cli(args, timeout=240, extra_env={TOKEN_ENV: TOKEN})
    assert out.returncode == 0, out.stderr[-3000:]
    (job,) = [r for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") != "sweep"]
    assert job.info.status == "FINISHED"
    assert "2 processes (actor tasks 0, 1)" in job.data.tags["actor_hosts"]
    assert job.data.metrics["cpu_gpu_ratio"] == job.data.metrics["actor_threads_used"] == 2  # gym: one each
    artifacts = Path(job.info.artifact_uri.removeprefix("file://"))
    hosts = json.loads((artifacts / "actors" / "hosts.json").read_text())
    row = dict(zip(hosts["columns"], hosts["data"][0], strict=True))
    assert (row["host"], row["tasks"], row["processes"]) == (socket.gethostname(), "0 1", 2)
    procs = json.loads((artifacts / "actors" / "processes.json").read_text())
    assert sorted(dict(zip(procs["columns"], r, strict=True))["task"] for r in procs["data"]) == ["0", "1"]
    job_dir = tmp_path / "multirun" / "0"
    assert (job_dir / ADDRESS_FILE).exists() and list((job_dir / "actor-tasks").glob("*_submitted.pkl"))
    # The token: in no file of the sweep (submitit's pickles and logs included), no param, tag or output.
    files = [p for p in (tmp_path / "multirun").rglob("*") if p.is_file()] + [
        p for p in artifacts.rglob("*") if p.is_file()
    ]
    assert len(files) > 10 and not [str(p) for p in files if TOKEN.encode() in p.read_bytes()]
    assert TOKEN not in json.dumps([job.data.params, job.data.tags]) and TOKEN not in out.stdout + out.stderr
    assert _left_behind(str(tmp_path)) == []
