"""The study's SM-limit sweep (its Figure 4), then its report.

On a CUDA host the learner and inference get `sm_limit` SMs (experiment=sm_sweep, green
contexts); without CUDA, `sm_limit` caps their CPU intra-op threads (experiment=sm_sweep_cpu).

    python pipelines/sm_sweep.py               # sm_sweep on CUDA, sm_sweep_cpu otherwise; default task
    python pipelines/sm_sweep.py --quick       # 8 actors, the smoke task: a couple of minutes on 2 CPU cores
"""

import sys

import torch

from rlbench.cli.run_and_report import run_pipeline

EXPERIMENT = "experiment=sm_sweep" if torch.cuda.is_available() else "experiment=sm_sweep_cpu"
FULL = [EXPERIMENT]
QUICK = [EXPERIMENT, "actors=8", "workload=smoke", "progress=log"]

if __name__ == "__main__":
    sys.exit(run_pipeline("sm_sweep", FULL, QUICK))
