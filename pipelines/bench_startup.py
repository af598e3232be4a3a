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

Both Atari engines (`--engines`, default ale and envpool where EnvPool is installed) run side by
side: each of `--rounds` rounds runs every env count on each engine in turn (the order flipped
each round), and the figures are medians over the rounds, named by engine
(`startup_pong_<n>_<engine>_s`, `..._second_s`, `..._envs_s`, `..._second_envs_s`), with each
round's ratio EnvPool / ale-py (`..._ratio`: the median of the rounds' ratios).

It measures the rlbench on PYTHONPATH (or installed), so one script times two commits (a commit
without env.engine runs its one engine, ale-py, with `--engines ale`):

    python pipelines/bench_startup.py --rounds 3
    PYTHONPATH=/tmp/old-checkout python pipelines/bench_startup.py --envs 4 40 --repeats 3 --engines ale
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

from rlbench.cli.command import Parser, refuse
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


ENGINES = ("ale", "envpool")
# EnvPool / ale-py ratios printed; not the second job's envs part, whose ale-py side is a take
# from the shelf (microseconds: its ROM reloads come in the reset after, inside `second_s`)
RATIO_NAMES = {"s": "start", "second_s": "second", "envs_s": "envs"}


def engine_overrides(engine: str) -> list[str]:
    """env.engine=<engine> where this commit's Atari schema has the key (else its one engine)."""
    from dataclasses import fields

    from rlbench.core.env_families import family

    return [f"env.engine={engine}"] if "engine" in {f.name for f in fields(family("atari").Schema)} else []


def pong_job(envs: int, seed: int, folder: Path, engine: str = "ale") -> list[str]:
    return [
        "env=pong",
        *engine_overrides(engine),
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


def child(envs: int, folder: Path, engine: str) -> None:
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
        final = run_job(job_of(compose_checked(pong_job(envs, seed, folder, engine))))
        starts.append(roles[-1].stepping_since - opened[-1])
        logged.append(final.get("job_start_s"))  # the job's own metrics, where this commit has them
        got.append(final.get("job_start_envs_s"))
    reused = None if taken is None else shelf_taken() > taken  # the second job took the first's envs
    out = {"envs": envs, "starts": starts, "job_start_s": logged, "job_start_envs_s": got, "reused": reused}
    print(json.dumps(out), flush=True)


def pong_starts(envs: int, folder: Path, engine: str) -> dict:
    p = subprocess.run(
        [sys.executable, __file__, "--child", str(envs), "--store", str(folder), "--engines", engine],
        check=False,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if p.returncode != 0:
        sys.exit(
            f"{PROG}: the {engine} Pong jobs at {envs} envs failed (exit {p.returncode}): {p.stderr.strip()[-1500:]}"
        )
    return json.loads(p.stdout.strip().splitlines()[-1])


def cartpole_wall(folder: Path) -> float:
    args = [sys.executable, "-m", "rlbench", *CARTPOLE_TINY, *store_overrides(folder), f"hydra.run.dir={folder}/out"]
    t0 = time.perf_counter()
    p = subprocess.run(args, check=False, capture_output=True, text=True, timeout=900, cwd=folder)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{PROG}: the CartPole job failed (exit {p.returncode}): {p.stderr.strip()[-1500:]}")
    return wall


def one_start(n: int, engine: str, folder: Path) -> dict[str, float]:
    """Two Pong jobs on `engine` in a new process: their starts and envs parts (s), printed."""
    out = pong_starts(n, folder, engine)
    reused = {True: "yes", False: "no"}.get(out.get("reused"), "no shelf on this commit")
    print(
        f"  {n} envs, {engine}: starts {', '.join(f'{s:.2f}' for s in out['starts'])} s; the jobs' "
        f"job_start_s {out['job_start_s']}, job_start_envs_s {out.get('job_start_envs_s')}; "
        f"the second job took the first's envs: {reused}",
        flush=True,
    )
    got = {"s": out["starts"][0], "second_s": out["starts"][1]}
    envs = out.get("job_start_envs_s") or [None, None]
    for key, value in zip(("envs_s", "second_envs_s"), envs, strict=True):
        if value is not None:  # a commit that logs the part of a start getting its envs
            got[key] = value
    return got


def engines_here(asked: list[str]) -> list[str]:
    """The engines to time: `asked`, refused where EnvPool is asked for and not installed."""
    try:
        from rlbench.envs.atari.engines import envpool_missing
    except ImportError:  # a commit with one engine
        return asked
    missing = envpool_missing()
    if "envpool" in asked and missing is not None:
        refuse(PROG, f"--engines=envpool: allowed: ale here; envpool is not available: {missing}")
    return asked


def side_by_side(counts: list[int], engines: list[str], rounds: int, folder: Path) -> dict[str, float]:
    """Medians over `rounds` of each engine's starts, engines in turn (flipped each round), and the
    median of the rounds' EnvPool / ale-py ratios."""
    seen: dict[str, list[float]] = {}
    for r in range(rounds):
        for n in counts:
            got = {e: one_start(n, e, folder) for e in (engines if r % 2 == 0 else engines[::-1])}
            for e, parts in got.items():
                for key, value in parts.items():
                    seen.setdefault(f"startup_pong_{n}_{e}_{key}", []).append(value)
            if len(got) == 2:
                for key in set(got["ale"]) & set(got["envpool"]) & set(RATIO_NAMES):
                    ratio = got["envpool"][key] / got["ale"][key] if got["ale"][key] > 0 else float("nan")
                    seen.setdefault(f"startup_pong_{n}_{RATIO_NAMES[key]}_ratio", []).append(ratio)
    return {name: statistics.median(values) for name, values in seen.items()}


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=number(int, lo=1), nargs="+", default=[4, 40, 256], help="Pong env counts")
    ap.add_argument("--repeats", type=number(int, lo=1), default=3, help="timed CartPole jobs")
    ap.add_argument("--engines", choices=ENGINES, nargs="+", default=list(ENGINES), help="Atari engines to time")
    ap.add_argument("--rounds", type=number(int, lo=1), default=3, help="rounds of every count on every engine")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        child(args.child, args.store, args.engines[0])
        return 0
    engines = engines_here(list(dict.fromkeys(args.engines)))
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        folder = Path(tmp)
        figures = side_by_side(args.envs, engines, args.rounds, folder)
        cartpole_wall(folder)  # makes the store's tables: not timed
        walls = [cartpole_wall(folder) for _ in range(args.repeats)]
        print(f"  tiny CartPole walls: {', '.join(f'{w:.1f}' for w in walls)} s", flush=True)
        figures["cartpole_tiny_wall_s"] = statistics.median(walls)
    for name, value in figures.items():
        print(f"{name}={value:.2f}" if "ratio" not in name else f"{name}={value:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
