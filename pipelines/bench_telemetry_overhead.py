"""Telemetry overhead: the same job with telemetry on and off, alternately, in one command.

Each repeat runs the job twice (on, then off; the order flips every repeat) through
rlbench.job.run_job into a throw-away MLflow store, and compares the jobs' `fps`. "On" is
everything telemetry does: the sampler thread, the op metrics and the timeline's span
recording (trace.json, docs/timeline.md) and writing. The
ratio of the medians is printed last as `telemetry_overhead_ratio=<fps on / fps off>`
(target >= 0.98). The default job is actors + inference without the learner: a learner
update (~10 s of both cores on a CPU host) lands at random times and swamps a 2% effect.
Pairs still vary by +-15% on a busy VM, hence many repeats; the sampler thread's own CPU
time is printed too, as a noise-free figure of its cost.

    python pipelines/bench_telemetry_overhead.py --repeats 11
    python pipelines/bench_telemetry_overhead.py --repeats 3 env=cartpole workload=smoke
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile

from hydra import compose, initialize_config_dir

from rlbench.__main__ import CONF_DIR
from rlbench.config.schema import register_configs
from rlbench.job import run_job

DEFAULT_JOB = ["workload=smoke", "workload.frames=200000", "actors=40", "learner=false"]


def run_once(overrides: list[str], telemetry: bool, store: str) -> dict:
    extra = [f"telemetry.enabled={str(telemetry).lower()}", f"tracking.uri=sqlite:///{store}/mlflow.db",
             f"tracking.artifact_location={store}/artifacts", "tracking.experiment=bench", "progress=log"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides + extra)
    return run_job(cfg, overrides)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("overrides", nargs="*", help=f"job overrides (default: {' '.join(DEFAULT_JOB)})")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    register_configs()
    overrides = args.overrides or DEFAULT_JOB
    on, off, sampler_share = [], [], []
    with tempfile.TemporaryDirectory() as store:
        for i in range(args.repeats):
            order = (True, False) if i % 2 == 0 else (False, True)
            for telemetry in order:
                result = run_once(overrides, telemetry, store)
                (on if telemetry else off).append(result["fps"])
                if telemetry and "telemetry_cpu_s" in result:
                    sampler_share.append(result["telemetry_cpu_s"] / result["runtime_s"])
            print(f"repeat {i + 1}: fps on {on[-1]:.0f}, off {off[-1]:.0f}", flush=True)
    pairs = [a / b for a, b in zip(on, off)]
    print(f"median fps with telemetry {statistics.median(on):.0f}, without {statistics.median(off):.0f} "
          f"(job: {' '.join(overrides)}); per-repeat ratios {min(pairs):.3f}..{max(pairs):.3f}")
    if sampler_share:
        print(f"sampler thread CPU: median {100 * statistics.median(sampler_share):.2f}% of one core over the task")
    print(f"telemetry_overhead_ratio={statistics.median(on) / statistics.median(off):.3f}")


if __name__ == "__main__":
    main()
