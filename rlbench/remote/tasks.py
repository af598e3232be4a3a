"""A job's actor tasks (actor_hosts > 0): actor processes on other nodes, placed by submitit as
ONE array beside the learner (an sbatch array under SLURM, else submitit's local executor).
Each `actor_task` reads the learner's address (remote/handoff.py) and runs the actor loop; the
token travels in the environment only. `ActorTasks` submits, watches and cancels the array.
docs/scale-out.md, "6. Actor hosts".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import submitit
from submitit.helpers import clean_env
from submitit.slurm.slurm import SlurmExecutor

from rlbench.core.address import TOKEN_ENV
from rlbench.core.env_families import family
from rlbench.core.errors import CommandError
from rlbench.core.resources import usable_cpus
from rlbench.prepare.compose import compose_job
from rlbench.remote.handoff import read_address

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often the watcher asks submitit for the tasks' states (SLURM: sacct, cached by submitit)
TASK_NAME = "rlbench-actors"


def launch_params(launch, kind: str) -> dict:
    """submitit's parameters for the actor array from `launch` (ActorLaunchConfig): SLURM's
    resources per task (one node's CPUs, memory, time, partition, account; no GPU); the local
    executor takes its time limit only."""
    if kind == "local":
        return {"timeout_min": launch.timeout_min}
    params = {
        "name": TASK_NAME,
        "timeout_min": launch.timeout_min,
        "cpus_per_task": launch.cpus_per_task,
        "mem_gb": launch.mem_gb,
        "nodes": 1,
        "tasks_per_node": 1,
    }
    return params | {k: getattr(launch, k) for k in ("partition", "account") if getattr(launch, k) is not None}


def executor(kind: str, folder: Path, params: dict):
    """submitit's executor of `kind` ("slurm" or "local") keeping its files in `folder`."""

    ex = submitit.SlurmExecutor(folder) if kind == "slurm" else submitit.LocalExecutor(folder)
    ex.update_parameters(**ex._convert_parameters(params))  # generic names to the executor's, as AutoExecutor does
    return ex


def sbatch_text(params: dict, folder: Path, count: int) -> str:
    """The sbatch script submitit would submit for an array of `count` tasks with `params` (the
    generic names submitit's executors take, or SLURM's), made by submitit's own SlurmExecutor
    without submitting anything (this host needs no SLURM for it)."""

    class _Text(SlurmExecutor):  # its constructor refuses a host without srun; only the text is made here
        @classmethod
        def affinity(cls) -> int:
            return 1

    ex = _Text(folder)
    ex.update_parameters(**ex._convert_parameters(params))
    ex.parameters["map_count"] = count  # what submitit sets for an array (SlurmExecutor's map_array)
    return ex._make_submission_file_text(ex._submitit_command_str, "dry-run")


def actor_task(address_file: str, task: int, envs: int, overrides: list[str], wait_s: float) -> str:
    """One actor task, run by submitit on its node: the learner's address from `address_file`
    (waiting up to `wait_s`), then the actor loop for `envs` envs of the job's env (`overrides`)
    on every CPU of this node (the family's pool: Atari's threads, gym's one), its Hello naming
    `task`. Returns the actor's last line; raises RuntimeError with it on a failure (submitit
    records the task failed)."""
    from rlbench.remote.actor_loop import PROG, run_actor  # lazy: keeps grpc off the start

    address = read_address(Path(address_file), wait_s)
    env_cfg = compose_job(overrides, host=False).env
    threads = family(env_cfg.kind).hardware_threads(None, len(usable_cpus()))
    try:
        line = run_actor(address, env_cfg, envs, threads, os.environ.get(TOKEN_ENV) or None, task=str(task))
    except CommandError as e:  # the job unreachable, refusing or lost: the task failed
        line = f"{PROG}: {e}"
        print(line, flush=True)
        raise RuntimeError(f"actor task {task}: {line}") from e
    print(line, flush=True)
    return line


class ActorTasks:
    """The job's actor array: submitted at construction, watched, stopped by `stop`.

    `fail(reason)` is called (once, from the watcher's thread) when a task ends before the job
    stopped it: the job's reset raises the reason while it still waits for the envs."""

    def __init__(
        self,
        kind: str,
        folder: Path,
        launch,
        sizes: list[int],
        overrides: list[str],
        address_file: Path,
        wait_s: float,
        fail,
    ):

        self.kind, self._fail, self._stopping = kind, fail, threading.Event()
        ex = executor(kind, folder, launch_params(launch, kind))
        n = len(sizes)
        # A SLURM job's own variables (SLURM_*, SUBMITIT_*) would leak into the array it submits
        # (submitit's advice for jobs that submit jobs); the token stays: the tasks need it.
        with clean_env():
            self.jobs = ex.map_array(
                actor_task, [str(address_file)] * n, list(range(n)), sizes, [overrides] * n, [wait_s] * n
            )
        log.info(
            "actor tasks: %d submitted (%s executor, ids %s), their files in %s",
            n,
            kind,
            " ".join(str(j.job_id) for j in self.jobs),
            folder,
        )
        self._watcher = threading.Thread(target=self._watch, name="actor-tasks", daemon=True)
        self._watcher.start()

    def states(self) -> list[str]:
        """Each task's scheduler state (submitit's: PENDING, RUNNING, FINISHED, FAILED, ...)."""
        return [_state(j) for j in self.jobs]

    def missing(self, joined: set[str]) -> str:
        """The tasks whose process has not joined, with their ids and states; '' when none."""
        left = [f"{i} ({job.job_id}: {_state(job)})" for i, job in enumerate(self.jobs) if str(i) not in joined]
        return f"actor tasks not joined: {', '.join(left)}" if left else ""

    def _watch(self) -> None:
        while not self._stopping.wait(POLL_S):
            for i, job in enumerate(self.jobs):
                if _done(job) and not self._stopping.is_set():
                    self._fail(
                        f"actor task {i} ({self.kind} job {job.job_id}) ended (state {_state(job)}) before "
                        f"the job stopped it{_tail(job)}"
                    )
                    return

    def stop(self, grace_s: float) -> None:
        """After the job's server ended the streams (the tasks' actors exit 0): wait for the tasks,
        all within `grace_s`, then cancel the rest (SLURM: scancel; local: SIGINT, then the
        executor's controller kills what is left)."""
        self._stopping.set()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and not all(_done(j) for j in self.jobs):
            time.sleep(0.2)  # polling submitit's states: it offers no wait with a timeout
        left = [j for j in self.jobs if not _done(j)]
        for job in left:
            job.cancel(check=False)
        if left:
            log.warning("actor tasks cancelled at the job's end: %s", " ".join(str(j.job_id) for j in left))
        if self.kind == "local":  # this host's processes: gone before the job returns
            for job in left:
                _reap(job, grace_s)


def _state(job) -> str:
    try:
        return str(job.state)
    except Exception as e:  # noqa: BLE001 - a scheduler that does not answer: say so, do not fail the job
        return f"unknown ({type(e).__name__})"


def _done(job) -> bool:
    try:
        return bool(job.done())
    except Exception:  # noqa: BLE001 - as _state
        return False


def _tail(job, lines: int = 1) -> str:
    """': <its log's last line>' (stderr: a Python error's last line says what it was; else
    stdout), or '' when there is none yet."""
    for path in (job.paths.stderr, job.paths.stdout):
        try:
            text = [t for t in Path(path).read_text(errors="replace").strip().splitlines() if t.strip()]
        except OSError:
            continue
        if text:
            return ": " + " | ".join(text[-lines:])
    return ""


def _reap(job, grace_s: float) -> None:
    """A local task's controller after its SIGINT: waited for, killed after `grace_s`."""
    proc = getattr(job, "_process", None)
    if proc is None:
        return
    try:
        proc.wait(grace_s)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: it did not stop
        proc.kill()
        proc.wait()
