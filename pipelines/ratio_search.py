"""The CPU/GPU ratio search (Optuna over actors, actor_threads and sm_limit), then its report.

    python pipelines/ratio_search.py           # search=ratio: 12 trials, fps vs energy per task
    python pipelines/ratio_search.py --quick   # 4 trials of the smoke task, fps only (no energy
                                               # sensor needed): a few minutes on 2 CPU cores
Rerunning resumes the study (search.study); pass search.study=<new name> for a fresh one.
"""

import sys

from rlbench.cli.run_and_report import run_pipeline

FULL = ["search=ratio"]
QUICK = [
    "search=ratio",
    "search.study=ratio_quick",
    "search.n_trials=4",
    "search.actors=[2,16]",
    "search.objectives=[fps]",
    "search.directions=[maximize]",
    "workload=smoke",
    "progress=log",
]

if __name__ == "__main__":
    sys.exit(run_pipeline("ratio_search", FULL, QUICK))
