"""Telemetry overhead: the same job with telemetry on and off, alternately, in one command.

Each repeat runs the job twice (on, then off; the order flips every repeat) through
rlbench.job.run_job into a throw-away MLflow store, and compares the jobs' `fps`. The
ratio of the medians is printed last as `telemetry_overhead_ratio=<fps on / fps off>`
(target >= 0.98).

    python pipelines/bench_telemetry_overhead.py --repeats 5
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

DEFAULT_JOB = ["workload=smoke", "workload.frames=120000", "actors=40"]


def run_once(overrides: list[str], telemetry: bool, store: str) -> float:
    extra = [f"telemetry.enabled={str(telemetry).lower()}", f"tracking.uri=sqlite:///{store}/mlflow.db",
             f"tracking.artifact_location={store}/artifacts", "tracking.experiment=bench", "progress=log"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides + extra)
    return run_job(cfg, overrides)["fps"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("overrides", nargs="*", help=f"job overrides (default: {' '.join(DEFAULT_JOB)})")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    register_configs()
    overrides = args.overrides or DEFAULT_JOB
    on, off = [], []
    with tempfile.TemporaryDirectory() as store:
        for i in range(args.repeats):
            order = (True, False) if i % 2 == 0 else (False, True)
            for telemetry in order:
                (on if telemetry else off).append(run_once(overrides, telemetry, store))
            print(f"repeat {i + 1}: fps on {on[-1]:.0f}, off {off[-1]:.0f}", flush=True)
    print(f"median fps with telemetry {statistics.median(on):.0f}, without {statistics.median(off):.0f} "
          f"(job: {' '.join(overrides)})")
    print(f"telemetry_overhead_ratio={statistics.median(on) / statistics.median(off):.3f}")


if __name__ == "__main__":
    main()
