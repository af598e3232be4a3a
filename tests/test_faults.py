"""The fault suite: real rlbench processes killed (SIGKILL) or stopped (SIGTERM) once they have a
RUNNING run (the store is polled, never slept on), then the states the next start leaves: no
run, parent or profile RUNNING, whatever experiment that start uses; the exit codes and the
one line a stopped command ends with; a sweep's summary rows; a resumed sweep that continues
its parent. Also an artifact location that cannot be written and two writers on one store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import mlflow
import psutil
import pytest

from rlbench.core.signals import STOP_BOUND_S
from tests.conftest import CARTPOLE_TINY, ROOT, main_in_process, rlbench_cli, runs, wait_until

pytestmark = pytest.mark.e2e
TINY = [*CARTPOLE_TINY, "actors=2", "progress=log", "telemetry.rate_hz=2"]
LONG = ["workload.frames=400000000"]  # runs until stopped


def _env() -> dict:
    """The worktree's rlbench and hydra plugin, whatever folder the command runs in."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "HYDRA_FULL_ERROR": "0", "PYTHONUNBUFFERED": "1"}


def _start(args: list[str], cwd: Path, module: str = "rlbench") -> psutil.Popen:
    """The command in `cwd`/work (the store fixture's mlflow.db lies in cwd itself: a stray one
    the command made would be cwd/work/mlflow.db)."""
    cwd = _work(cwd)
    return psutil.Popen(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _work(cwd: Path) -> Path:
    (cwd / "work").mkdir(exist_ok=True)
    return cwd / "work"


def _run(args: list[str], cwd: Path, module: str = "rlbench", timeout: float = 120) -> subprocess.CompletedProcess:
    cwd = _work(cwd)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _overrides(store, experiment: str = "test") -> list[str]:
    return [
        o if not o.startswith("tracking.experiment=") else f"tracking.experiment={experiment}"
        for o in store["overrides"]
    ]


def _when_running(proc: psutil.Popen, store, what, experiment: str = "test", timeout: float = 90):
    """The first RUNNING run of `experiment` that `what(run)` accepts, once there is one."""

    def found():
        assert proc.poll() is None, f"exited ({proc.returncode}) before its run: {proc.stderr.read()[-2000:]}"
        return next((r for r in runs(store["uri"], experiment) if r.info.status == "RUNNING" and what(r)), None)

    return wait_until(found, timeout, f"a RUNNING run in {experiment}", poll_s=0.3)


def _stop(proc: psutil.Popen, signum: int, timeout: float = 60) -> tuple[int, str]:
    proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.is_running():
            proc.kill()
    return proc.returncode, err


def _next_start(uri: str) -> None:
    """What every rlbench start in the store does first (rlbench/tracking/orphans.py)."""
    from rlbench.tracking.orphans import close_orphans

    mlflow.set_tracking_uri(uri)
    close_orphans(stale_after_s=300.0)


def _run_of(uri: str, run_id: str):
    mlflow.set_tracking_uri(uri)
    return mlflow.get_run(run_id)


def _children(store, parent_id: str) -> list:
    return [r for r in runs(store["uri"]) if r.data.tags.get("mlflow.parentRunId") == parent_id]


def _summary(parent_id: str) -> list[dict]:
    path = mlflow.MlflowClient().download_artifacts(parent_id, "summary.json")
    table = json.loads(Path(path).read_text())
    return [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]


def test_a_killed_job_is_closed_by_the_next_start_anywhere_and_sigterm_exits_143(store, tmp_path):
    killed = _start([*TINY, *LONG, *_overrides(store, "first")], tmp_path)
    orphan = _when_running(killed, store, lambda r: True, "first")
    _stop(killed, signal.SIGKILL)
    assert _run_of(store["uri"], orphan.info.run_id).info.status == "RUNNING"
    job = _start([*TINY, *LONG, *_overrides(store, "second")], tmp_path)  # another experiment
    run = _when_running(job, store, lambda r: True, "second")
    closed = _run_of(store["uri"], orphan.info.run_id)
    assert closed.info.status == "KILLED" and "orphaned: its process" in closed.data.tags["end_reason"]
    code, err = _stop(job, signal.SIGTERM)
    assert code == 143 and "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == f"rlbench: stopped by SIGTERM: job run {run.info.run_id} recorded as KILLED"
    assert _run_of(store["uri"], run.info.run_id).info.status == "KILLED"
    assert not (tmp_path / "work" / "mlflow.db").exists()  # nothing in the folder it ran in


def test_sigterm_to_a_sweep_lists_every_job_in_its_summary(store, tmp_path):
    sweep = _start(["-m", "seed=1,2,3", *TINY, *LONG, *store["overrides"]], tmp_path)
    job = _when_running(sweep, store, lambda r: "mlflow.parentRunId" in r.data.tags)
    code, err = _stop(sweep, signal.SIGTERM)
    parent_id = job.data.tags["mlflow.parentRunId"]
    assert code == 143 and err.strip().splitlines()[-1] == (
        f"rlbench: stopped by SIGTERM: job run {job.info.run_id} recorded as KILLED; "
        f"sweep parent {parent_id} recorded as KILLED"
    )
    assert _run_of(store["uri"], parent_id).info.status == "KILLED"
    rows = _summary(parent_id)
    assert [(r["status"], r["run_id"]) for r in rows] == [
        ("KILLED", job.info.run_id),
        ("NOT STARTED", None),
        ("NOT STARTED", None),
    ]


def test_a_sweep_killed_then_resumed_continues_its_parent_and_its_report_sees_every_job(store, tmp_path):
    from rlbench.tracking.study_records import load_parent

    args = ["-m", "seed=1,2", *TINY, *store["overrides"]]
    # the second job is RUNNING for seconds (its run opens before its envs, charts and record
    # close it), and the store is polled every 0.3 s: the tiny task is long enough to be caught
    sweep = _start(args, tmp_path)
    second = _when_running(sweep, store, lambda r: r.info.run_name == "seed=2", timeout=180)
    _stop(sweep, signal.SIGKILL)
    out = main_in_process([*args, "resume=true"])  # the kill above is the process's part
    assert out.returncode == 0, out.stderr[-3000:]
    parent_id = second.data.tags["mlflow.parentRunId"]
    assert f"resume: continuing parent run {parent_id}" in out.stdout
    parents = [r for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") == "sweep"]
    assert [p.info.run_id for p in parents] == [parent_id] and parents[0].info.status == "FINISHED"
    kids = {(k.info.run_name, k.info.status) for k in _children(store, parent_id)}
    assert kids == {("seed=1", "FINISHED"), ("seed=2", "KILLED"), ("seed=2", "FINISHED")}
    assert [r["status"] for r in _summary(parent_id)] == ["FINISHED", "FINISHED"]
    assert load_parent(parent_id).missing == []
    assert not [r for r in runs(store["uri"]) if r.info.status == "RUNNING"]


def test_a_killed_search_worker_leaves_no_running_trial_run(store, tmp_path):
    args = [
        "-m",
        "search=ratio",
        "search.n_trials=1",
        f"search.storage=sqlite:///{tmp_path}/optuna.db",
        "search.heartbeat_s=1",
        "search.objectives=[fps]",
        "search.directions=[maximize]",
        "search.actors=[2,2]",
        "search.actor_threads=[1,1]",
        "search.sm_limit=[1,1]",
        *TINY,
        *store["overrides"],
    ]
    worker = _start([*args, *LONG], tmp_path)
    trial = _when_running(worker, store, lambda r: "optuna_trial" in r.data.tags)
    _stop(worker, signal.SIGKILL)
    time.sleep(4)  # not synchronisation: optuna's grace period (3 heartbeats) must pass on the wall clock
    out = _run(args, tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    closed = _run_of(store["uri"], trial.info.run_id)
    assert closed.info.status == "KILLED" and "orphaned" in closed.data.tags["end_reason"]
    assert not [r for r in runs(store["uri"]) if r.info.status == "RUNNING"]
    assert not (tmp_path / "work" / "mlflow.db").exists()  # the stale runs were looked for in the configured store


_KILLED_WHILE_LOGGING = """
import os, signal, sys
import mlflow
from rlbench.config.schema import TrackingConfig
from rlbench.tracking.profiles import write_profile
mlflow.log_metrics = lambda *a, **kw: os.kill(os.getpid(), signal.SIGKILL)  # killed after its tables
tables = {"env": [{"threads": 1, "envs": 4, "sps": 100.0, "env_step_s": 0.01}],
          "inference": [{"units": 1, "batch": 4, "seconds": 0.001}], "update": [], "corun": [], "power": []}
write_profile(TrackingConfig(uri=sys.argv[1], experiment="rlbench-profiles"), "profile CartPole-v1 r2d2",
              {"env_id": "CartPole-v1"}, {"algo.name": "r2d2"}, tables, {}, [])
"""


def test_a_profile_killed_while_logging_is_refused_by_predict_and_closed_by_the_next_start(store, tmp_path):
    died = subprocess.run(
        [sys.executable, "-c", _KILLED_WHILE_LOGGING, store["uri"]],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr[-2000:]
    (profile,) = runs(store["uri"], "rlbench-profiles")
    assert profile.info.status == "RUNNING"
    out = _run(
        ["--profile", profile.info.run_id, "--tracking-uri", store["uri"], "env=cartpole"], tmp_path, "rlbench.predict"
    )
    assert out.returncode == 2 and "is incomplete: status RUNNING" in out.stderr, out.stderr[-2000:]
    _next_start(store["uri"])
    assert _run_of(store["uri"], profile.info.run_id).info.status == "KILLED"


def test_sigterm_while_many_atari_envs_are_created_stops_at_once(store, tmp_path):
    job = _start(
        ["env=pong", "workload=smoke", "workload.frames=200000", "actors=256", "progress=log", *store["overrides"]],
        tmp_path,
    )
    log = tmp_path / "out" / "__main__.log"
    wait_until(lambda: log.exists() and "MLflow run" in log.read_text(), 120, "the job opening its run", poll_s=0.2)
    job.send_signal(signal.SIGTERM)
    try:
        job.wait(timeout=5)  # creating 256 emulators takes ~20 s here: it must not wait for them
    finally:
        if job.is_running():
            job.kill()
    assert job.returncode in (143, -signal.SIGTERM)  # its handler, or SIGTERM's default action during creation
    _next_start(store["uri"])
    assert [r.info.status for r in runs(store["uri"])] == ["KILLED"]


@contextmanager
def _cpus_busy(n: int):
    """`n` processes that spin at normal priority, killed on the way out."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)  # spinning
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait()


def test_sigterm_to_a_busy_pong_job_on_a_loaded_host_exits_within_its_bound(store, tmp_path):
    """Seen with the host busy: over 5 s and no line before an outer timeout (quiet: 2.3 s). The
    runner waited for ale-py's reset, the stopped job drew its telemetry chart and Python's
    finalization ran 7-18 s beside ale-py's threads; now STOP_BOUND_S (docs/jobs.md). The load:
    4 spinning processes per CPU, from the SIGTERM on (2 per CPU: 8.1 s unfixed on a quiet host,
    just over the bound; 4: 16.7 s unfixed, 1.1 s fixed)."""
    job = _start(
        ["env=pong", "workload=smoke", "workload.frames=2000000", "actors=4", "progress=log", *store["overrides"]],
        tmp_path,
    )
    log = tmp_path / "out" / "__main__.log"
    wait_until(
        lambda: job.poll() is not None or (log.exists() and "frames" in log.read_text()),
        300,
        "the job logging progress",
        poll_s=0.2,
    )
    assert job.poll() is None, job.communicate()[1][-2000:]
    family = job.children(recursive=True)
    with _cpus_busy(4 * os.cpu_count()):
        t0 = time.monotonic()
        code, err = _stop(job, signal.SIGTERM)
        took = time.monotonic() - t0
    (run,) = runs(store["uri"])
    assert took < STOP_BOUND_S and code == 143 and "Traceback" not in err, (took, err[-3000:])
    assert err.strip().splitlines()[-1] == f"rlbench: stopped by SIGTERM: job run {run.info.run_id} recorded as KILLED"
    assert run.info.status == "KILLED"
    assert not [p for p in family if p.is_running()]
    drawn = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "telemetry")}
    assert drawn == {"telemetry/telemetry.csv", "telemetry/trace.json"}  # no chart drawn while stopping


def test_an_artifact_location_that_cannot_be_written_is_refused_before_any_run(store, tmp_path):
    (tmp_path / "a-file").write_text("")
    out = _run([*TINY, *store["overrides"], f"tracking.artifact_location={tmp_path}/a-file/artifacts"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert (
        f"tracking.artifact_location: the artifacts of experiment 'test' go to {tmp_path}/a-file/artifacts"
        in out.stderr
    )
    assert runs(store["uri"]) == []


@pytest.mark.e2e
def test_a_single_job_that_fails_from_a_fault_is_one_line_naming_its_run_and_its_log(store):
    """No traceback chain through Hydra on the terminal: the cause, the run (ended FAILED) and
    the log file that holds the traceback; exit 1."""
    out = rlbench_cli(
        ["env=cartpole", "workload=smoke", "workload.max_runtime_s=0.001", *store["overrides"]], timeout=300
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    (line,) = out.stderr.strip().splitlines()
    (run,) = runs(store["uri"])
    assert line.startswith("rlbench: the job failed: TimeoutError: workload.max_runtime_s=0.001 exceeded")
    assert f"(run {run.info.run_id} ended FAILED); traceback in " in line and run.info.status == "FAILED"
    log = Path(line.rpartition("traceback in ")[2])
    assert log.is_file() and "Traceback (most recent call last)" in log.read_text()


@pytest.fixture
def small_disk(tmp_path, empty_store_db):
    """An 80 MiB tmpfs of the test's own holding a new store (skipped where this runner may not
    mount one; under CI that fails, as the other tests CI requires do: tests/conftest.py)."""
    import shutil

    from tests.conftest import _unavailable

    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(disk)], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        _unavailable(f"no small filesystem to fill: mount -t tmpfs failed here ({made.stderr.strip()[:200]})")
    try:
        shutil.copyfile(empty_store_db, disk / "mlflow.db")
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_during_a_job_is_one_line_that_says_what_the_store_reads(small_disk, tmp_path):
    """The store's disk fills once the job has logged frames (tests/full_disk.py), on the default
    layout: the artifacts beside the store, MLflow's system metrics on. One line naming the full
    disk and the run as the store reads it (FAILED, or RUNNING where its end could not be written:
    then the next start closes it KILLED), exit 1, no SQL on the terminal, and what was written
    before still readable."""
    from rlbench.config.schema import TrackingConfig
    from rlbench.core.signals import UNENDED
    from rlbench.tracking.store import mark_stale_runs

    uri = f"sqlite:///{small_disk}/mlflow.db"
    args = [
        str(small_disk),
        *CARTPOLE_TINY,
        "workload.frames=200000",
        "workload.learner_updates=20",
        "progress=log",
        "tracking.log_every_s=1",
        "eval_envs=0",
        f"tracking.uri={uri}",
        "tracking.experiment=test",
        f"hydra.run.dir={tmp_path}/out",
    ]
    out = _run(args, tmp_path, module="tests.full_disk", timeout=300)
    (line,) = out.stderr.strip().splitlines()
    (run,) = runs(uri)
    assert out.returncode == 1 and line.startswith("rlbench: the job failed: the disk is full: "), out.stderr[-3000:]
    assert "database or disk is full" in line and "Traceback" not in out.stderr
    assert not [ln for ln in out.stdout.splitlines() if not ln.startswith("[20")], out.stdout[-3000:]  # log lines only
    said = "ended FAILED" if run.info.status == "FAILED" else UNENDED
    assert run.info.status in ("FAILED", "RUNNING") and f"(run {run.info.run_id} {said}); traceback in " in line, line
    assert run.data.params["env.id"] == "CartPole-v1" and run.data.metrics
    (small_disk / "filler").unlink()
    mark_stale_runs(TrackingConfig(uri=uri, experiment="test"))  # what the next start does
    assert mlflow.MlflowClient(uri).get_run(run.info.run_id).info.status in ("FAILED", "KILLED")


def _besides_progress(lines: list[str]) -> list[str]:
    """The lines a job prints that are not its normal ones: its start and its progress."""
    normal = ("][rlbench.core.progress][INFO] - ", "][rlbench.train.job][INFO] - MLflow run ")
    return [ln for ln in lines if not any(n in ln for n in normal)]


def test_a_full_disk_on_the_default_layout_ends_with_one_line_and_the_store_reads_as_it_says(small_disk):
    """As `python -m rlbench` run from a folder on the disk has it (README): the store, its
    artifacts beside it and Hydra's outputs/ (the job's log) on that one disk, which fills once the
    job has logged frames (tests/full_disk.py). The failure path needs no disk: exit 1, the last
    line names the full disk and the run as the store reads it, at most a few lines before it
    besides the job's progress, no traceback and no `--- Logging error ---` on the terminal; a run
    that reads RUNNING is closed KILLED by the next start."""
    from rlbench.config.schema import TrackingConfig
    from rlbench.core.signals import UNENDED
    from rlbench.tracking.store import mark_stale_runs

    (small_disk / "mlruns").mkdir()
    (small_disk / "mlflow.db").rename(small_disk / "mlruns" / "mlflow.db")
    uri = f"sqlite:///{small_disk}/mlruns/mlflow.db"
    args = [*CARTPOLE_TINY, "workload.frames=200000", "workload.learner_updates=20", "progress=log"]
    args += ["tracking.log_every_s=1", "eval_envs=0", "tracking.experiment=test"]
    args += ["tracking.uri=sqlite:///mlruns/mlflow.db"]  # the default, named: MLFLOW_TRACKING_URI must not move it
    command = [sys.executable, "-m", "tests.full_disk", str(small_disk), *args]
    out = subprocess.run(command, cwd=small_disk, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    *before, line = out.stderr.strip().splitlines() or [""]
    terminal = out.stdout + out.stderr
    assert out.returncode == 1 and line.startswith("rlbench: the job failed: the disk is full"), terminal[-3000:]
    assert "Traceback" not in terminal and "Logging error" not in terminal, terminal[-3000:]
    assert len(_besides_progress(out.stdout.splitlines() + before)) <= 5, terminal[-3000:]
    (run,) = runs(uri)
    said = "RUNNING" if f"(run {run.info.run_id} {UNENDED})" in line else "FAILED"
    assert f"(run {run.info.run_id} " in line and run.info.status == said, (run.info.status, line)
    (small_disk / "filler").unlink()
    mark_stale_runs(TrackingConfig(uri=uri, experiment="test"))  # what the next start does
    assert mlflow.MlflowClient(uri).get_run(run.info.run_id).info.status == ("KILLED" if said == "RUNNING" else said)
