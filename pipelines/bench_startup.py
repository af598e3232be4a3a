"""A job's start: how long from its MLflow run's creation to its actors' first step.

For each env count (`--envs`, default 4 40 256) a new process runs two Pong jobs of the same
spec, one after the other (seeds 1 and 2), as a sweep's process does: the first job's start is
`startup_pong_<n>_s`, the second's `startup_pong_<n>_second_s` (it may take the first job's
envs: rlbench/envs/shelf.py; each count's line says whether it did), and the first job's part
getting its envs `startup_pong_<n>_envs_s` (its `job_start_envs_s`, where the commit logs it: on
Atari, ale-py making the emulators one after another). Each start is read the
same way on any commit: from the return of
`mlflow.start_run` in the job's record to the actors' first step (`ActorRole.stepping_since`,
after the envs' first reset). The Pong jobs run `learner=false` with a task of a few steps per
env, so the process is about the start; the learner's first optimizer (torch._dynamo's import,
once a process) is in the CartPole figure. Then `--repeats` tiny CartPole jobs (tests/conftest.py
CARTPOLE_TINY) each run as `python -m rlbench` in a new process, timed from outside; their median
wall is `cartpole_tiny_wall_s` (a first job, not timed, makes the store).

It measures the rlbench on PYTHONPATH (or installed), so one script times two commits:

    python pipelines/bench_startup.py
    PYTHONPATH=/tmp/old-checkout python pipelines/bench_startup.py --envs 4 40 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlbench.cli.command import Parser
from rlbench.config.flags import number

PROG = "pipelines/bench_startup.py"
CARTPOLE_TINY = [
    "env=cartpole",
    "workload=smoke",
    "workload.frames=3000",
    "workload.learner_updates=2",
    "algo.min_replay=16",
]


def store_overrides(folder: Path) -> list[str]:
    return [
        f"tracking.uri=sqlite:///{folder}/mlflow.db",
        f"tracking.artifact_location={folder}/artifacts",
        "tracking.experiment=bench_startup",
        "tracking.system_metrics=false",
    ]


def pong_job(envs: int, seed: int, folder: Path) -> list[str]:
    return [
        "env=pong",
        f"actors={envs}",
        "learner=false",
        "workload=smoke",
        f"workload.frames={envs * 4 * 8}",
        f"seed={seed}",
        "telemetry.enabled=false",
        "progress=log",
        *store_overrides(folder),
    ]


def shelf_taken() -> int | None:
    """Envs the process's shelf has handed out again (None: a commit without the shelf)."""
    try:
        from rlbench.envs.shelf import SHELF
    except ImportError:
        return None
    return SHELF.taken


def child(envs: int, folder: Path) -> None:
    """Two Pong jobs in this process; prints their starts (s) as one JSON line."""
    import mlflow

    from rlbench.prepare.compose import compose_checked
    from rlbench.prepare.job import job_of
    from rlbench.roles.actors import ActorRole
    from rlbench.train.job import run_job

    opened, roles = [], []
    start_run, run = mlflow.start_run, ActorRole.run

    def timed_start_run(*a, **kw):
        active = start_run(*a, **kw)
        opened.append(time.perf_counter())
        return active

    def seen_run(self, stop):
        roles.append(self)
        return run(self, stop)

    mlflow.start_run, ActorRole.run = timed_start_run, seen_run
    starts, logged, got, taken = [], [], [], shelf_taken()
    for seed in (1, 2):
        final = run_job(job_of(compose_checked(pong_job(envs, seed, folder))))
        starts.append(roles[-1].stepping_since - opened[-1])
        logged.append(final.get("job_start_s"))  # the job's own metrics, where this commit has them
        got.append(final.get("job_start_envs_s"))
    reused = None if taken is None else shelf_taken() > taken  # the second job took the first's envs
    out = {"envs": envs, "starts": starts, "job_start_s": logged, "job_start_envs_s": got, "reused": reused}
    print(json.dumps(out), flush=True)


def pong_starts(envs: int, folder: Path) -> dict:
    p = subprocess.run(
        [sys.executable, __file__, "--child", str(envs), "--store", str(folder)],
        check=False,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if p.returncode != 0:
        sys.exit(f"{PROG}: the Pong jobs at {envs} envs failed (exit {p.returncode}): {p.stderr.strip()[-1500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cartpole_wall(folder: Path) -> float:
    args = [sys.executable, "-m", "rlbench", *CARTPOLE_TINY, *store_overrides(folder), f"hydra.run.dir={folder}/out"]
    t0 = time.perf_counter()
    p = subprocess.run(args, check=False, capture_output=True, text=True, timeout=900, cwd=folder)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{PROG}: the CartPole job failed (exit {p.returncode}): {p.stderr.strip()[-1500:]}")
    return wall


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=number(int, lo=1), nargs="+", default=[4, 40, 256], help="Pong env counts")
    ap.add_argument("--repeats", type=number(int, lo=1), default=3, help="timed CartPole jobs")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        child(args.child, args.store)
        return 0
    figures = {}
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        folder = Path(tmp)
        for n in args.envs:
            out = pong_starts(n, folder)
            print(
                f"  {n} envs: starts {', '.join(f'{s:.2f}' for s in out['starts'])} s; the jobs' "
                f"job_start_s {out['job_start_s']}; the second job took the first's envs: "
                f"{ {True: 'yes', False: 'no'}.get(out.get('reused'), 'no shelf on this commit') }",
                flush=True,
            )
            figures[f"startup_pong_{n}_s"], figures[f"startup_pong_{n}_second_s"] = out["starts"]
            envs_s = (out.get("job_start_envs_s") or [None])[0]
            if envs_s is not None:  # the first job's envs made: ale-py's part of its start
                print(
                    f"  {n} envs: the first job's start got its envs in {envs_s:.2f} s, the rest took "
                    f"{out['starts'][0] - envs_s:.2f} s",
                    flush=True,
                )
                figures[f"startup_pong_{n}_envs_s"] = envs_s
        cartpole_wall(folder)  # makes the store's tables: not timed
        walls = [cartpole_wall(folder) for _ in range(args.repeats)]
        print(f"  tiny CartPole walls: {', '.join(f'{w:.1f}' for w in walls)} s", flush=True)
        figures["cartpole_tiny_wall_s"] = statistics.median(walls)
    for name, value in figures.items():
        print(f"{name}={value:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
