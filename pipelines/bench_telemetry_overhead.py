"""Telemetry overhead: the same job with telemetry on and off, alternately, in one command.

Each repeat runs the job twice (on, then off; the order flips every repeat) through
rlbench.train.job.run_job into a throw-away MLflow store, and compares the jobs' `fps`. "On" is
everything telemetry does: the sampler thread, the op metrics and the timeline's span
recording (trace.json, docs/timeline.md) and writing. The
ratio of the medians is printed last as `telemetry_overhead_ratio=<fps on / fps off>`
(target >= 0.98). The default job is actors + inference without the learner: a learner
update (~10 s of both cores on a CPU host) lands at random times and swamps a 2% effect.
Pairs still vary by +-15% on a busy VM, hence many repeats; the sampler thread's own CPU
time is printed too, as a noise-free figure of its cost. One warm-up job runs first and is not
counted: a process's first job pays first-time imports and caches (seen: -25% fps), and it
was always a telemetry-on job.

    python pipelines/bench_telemetry_overhead.py --repeats 11
    python pipelines/bench_telemetry_overhead.py --repeats 3 env=cartpole workload=smoke
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from rlbench.cli.command import Parser, refuse
from rlbench.config.flags import number
from rlbench.config.rules import ConfigError
from rlbench.prepare.compose import compose_config, compose_job
from rlbench.prepare.job import job_of
from rlbench.telemetry.timing import OpTimer
from rlbench.telemetry.trace import SpanRecorder
from rlbench.train.job import run_job

PROG = "pipelines/bench_telemetry_overhead.py"
DEFAULT_JOB = ["workload=smoke", "workload.frames=200000", "actors=40", "learner=false"]


def run_once(overrides: list[str], telemetry: bool, store: str) -> dict:
    extra = [
        f"telemetry.enabled={str(telemetry).lower()}",
        f"tracking.uri=sqlite:///{store}/mlflow.db",
        f"tracking.artifact_location={store}/artifacts",
        "tracking.experiment=bench",
        "progress=log",
    ]
    return run_job(job_of(compose_config(overrides + extra), overrides))


def span_cost_s(n: int = 200_000) -> float:
    """Seconds one recorded span adds to an annotated operation (the timeline's cost per op):
    n empty annotations with a SpanRecorder attached, less n without, medians of 5."""

    def per_op(recording: bool) -> float:
        timer = OpTimer("bench")
        timer.spans = SpanRecorder("bench", time.perf_counter(), 1e9, max_events=n) if recording else None
        t0 = time.perf_counter()
        for _ in range(n):
            with timer.op("x"):
                pass
        return (time.perf_counter() - t0) / n

    return statistics.median(per_op(True) - per_op(False) for _ in range(5))


def trace_share(result: dict, store: str, cost_s: float) -> float | None:
    """The spans a job recorded (its trace.json, kept and dropped) x cost_s, over the actors'
    stepping time (frames / fps): the trace's share of the time fps is measured over."""
    import json

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{store}/mlflow.db")
    try:
        path = mlflow.MlflowClient().download_artifacts(result["run_id"], "telemetry/trace.json")
    except Exception:  # noqa: BLE001 - no trace (telemetry.trace_window_s=0)
        return None
    tracks = json.loads(Path(path).read_text())["rlbench"]["tracks"]
    spans = sum(t["spans"] + t["dropped"] for t in tracks.values())
    return spans * cost_s / (result["frames"] / result["fps"])


def main() -> None:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=number(int, lo=1), default=11)
    p.add_argument("overrides", nargs="*", help=f"job overrides (default: {' '.join(DEFAULT_JOB)})")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    overrides = args.overrides or DEFAULT_JOB
    try:
        compose_job(overrides)  # checked before the first job, as every command checks its overrides
    except ConfigError as e:
        refuse(PROG, f"{e} (no job run)")
    on, off, sampler_share, last_on = [], [], [], None
    with tempfile.TemporaryDirectory() as store:
        warm = run_once(overrides, True, store)  # the process's first job pays its first-time costs
        print(f"warm-up job (not counted): fps {warm['fps']:.0f}", flush=True)
        for i in range(args.repeats):
            order = (True, False) if i % 2 == 0 else (False, True)
            for telemetry in order:
                result = run_once(overrides, telemetry, store)
                (on if telemetry else off).append(result["fps"])
                if telemetry and "telemetry_cpu_s" in result:
                    sampler_share.append(result["telemetry_cpu_s"] / result["runtime_s"])
                if telemetry:
                    last_on = result
            print(f"repeat {i + 1}: fps on {on[-1]:.0f}, off {off[-1]:.0f}", flush=True)
        cost = span_cost_s()
        share = trace_share(last_on, store, cost)
    pairs = [a / b for a, b in zip(on, off, strict=True)]
    print(
        f"median fps with telemetry {statistics.median(on):.0f}, without {statistics.median(off):.0f} "
        f"(job: {' '.join(overrides)}); per-repeat ratios {min(pairs):.3f}..{max(pairs):.3f}, "
        f"median {statistics.median(pairs):.3f}"
    )
    if sampler_share:
        print(f"sampler thread CPU: median {100 * statistics.median(sampler_share):.2f}% of one core over the task")
    if share is not None:
        print(
            f"timeline (trace.json) recording: {1e9 * cost:.0f} ns per operation, "
            f"{100 * share:.3f}% of the actors' stepping time in the last job with telemetry"
        )
    print(f"telemetry_overhead_ratio={statistics.median(on) / statistics.median(off):.3f}")


if __name__ == "__main__":
    main()
