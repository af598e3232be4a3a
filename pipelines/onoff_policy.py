"""On- vs off-policy: R2D2 and V-trace on the same env, actors and task, then the report
with the onoff_policy figure and verdict line (RL-Scope: on-policy >= 3.5x more simulation-bound).

    python pipelines/onoff_policy.py            # experiment=onoff_policy: Pong, the default task
    python pipelines/onoff_policy.py --quick    # the smoke task: a few minutes on 2 CPU cores
    python pipelines/onoff_policy.py --quick env=breakout   # any extra rlbench override
"""

import sys

from rlbench.cli.run_and_report import run_pipeline

FULL = ["experiment=onoff_policy"]
QUICK = ["experiment=onoff_policy", "workload=smoke", "progress=log"]

if __name__ == "__main__":
    sys.exit(run_pipeline("onoff_policy", FULL, QUICK))
