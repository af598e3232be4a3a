"""The main command's share of wall time that is tasks: `python -m rlbench -m actors=4,40,256`.

Runs the README's main command (or the overrides given after `--`) in a new process with a
store of its own, timed from outside, then reads its jobs from the store. Prints by name:
`main_wall_s` (the command, start to exit), `main_tasks_s` (its jobs' `runtime_s`, summed: the
task from the actors' start to the learner's last update), `main_tasks_share` (the two's ratio;
issue 53's target: at least 0.8) and each job's `job_start_s`. The rest of the wall is the
process's imports, each job's start (run, envs, replay) and end (its record), and the sweep's.

    python pipelines/bench_main.py
    python pipelines/bench_main.py -- -m actors=2,4 env=cartpole workload=smoke
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rlbench.cli.command import Parser

PROG = "pipelines/bench_main.py"
MAIN = ["-m", "actors=4,40,256"]


def run_command(overrides: list[str], folder: Path) -> float:
    """The command's wall time, s; exits naming the failure where the command failed."""
    store = [
        f"tracking.uri=sqlite:///{folder}/mlflow.db",
        f"tracking.artifact_location={folder}/artifacts",
        "tracking.experiment=bench_main",
        f"hydra.sweep.dir={folder}/multirun",
        f"hydra.run.dir={folder}/out",
    ]
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-m", "rlbench", *overrides, *store], check=False, capture_output=True, text=True, cwd=folder
    )
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        said = " ".join(line.strip() for line in p.stderr.strip().splitlines()[-5:])
        sys.exit(f"{PROG}: the command failed (exit {p.returncode}): {said}")
    return wall


def jobs(folder: Path) -> list[dict]:
    """The finished jobs' names, runtime_s and job_start_s, in the order they ran."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{folder}/mlflow.db")
    exp = client.get_experiment_by_name("bench_main")
    runs = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", order_by=["attributes.start_time"])
    return [
        {
            "name": r.info.run_name,
            "runtime_s": r.data.metrics["runtime_s"],
            "job_start_s": r.data.metrics.get("job_start_s"),
        }
        for r in runs
        if "runtime_s" in r.data.metrics
    ]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    ap = Parser(prog=PROG, description=__doc__.splitlines()[0], epilog="after `--`: the command's overrides")
    ap.parse_args(argv[:cut])
    overrides = argv[cut + 1 :] or MAIN
    with tempfile.TemporaryDirectory(prefix="bench_main_") as tmp:
        wall = run_command(overrides, Path(tmp))
        done = jobs(Path(tmp))
    if not done:
        sys.exit(f"{PROG}: the command ran no finished job ({' '.join(overrides)})")
    tasks = sum(j["runtime_s"] for j in done)
    for j in done:
        start = "unknown" if j["job_start_s"] is None else f"{j['job_start_s']:.2f}"
        print(f"  {j['name']}: runtime_s {j['runtime_s']:.1f}, job_start_s {start}", flush=True)
    print(f"main_wall_s={wall:.2f}\nmain_tasks_s={tasks:.2f}\nmain_tasks_share={tasks / wall:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
