"""The study's actor sweep (its Figure 3), then its report.

python pipelines/actor_sweep.py            # experiment=actor_sweep: 4..256 actors, default task, Pong
python pipelines/actor_sweep.py --quick    # 4 actor counts, the smoke task: a few minutes on 2 CPU cores
python pipelines/actor_sweep.py --quick env=breakout   # any extra rlbench override
"""

import sys

from rlbench.cli.run_and_report import run_pipeline

FULL = ["experiment=actor_sweep"]
QUICK = ["experiment=actor_sweep", "actors=2,4,8,16", "workload=smoke", "progress=log"]

if __name__ == "__main__":
    sys.exit(run_pipeline("actor_sweep", FULL, QUICK))
