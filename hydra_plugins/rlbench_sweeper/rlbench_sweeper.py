"""rlbench's Hydra sweeper: Hydra's basic grid expansion, run the rlbench way.

Every job is composed and validated before the first starts; the sweep gets one MLflow
parent run; a failing job does not stop the others. The logic lives in rlbench.sweep.
"""

import sys
from dataclasses import dataclass
from typing import Any, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore


@dataclass
class RlbenchSweeperConf:
    _target_: str = "hydra_plugins.rlbench_sweeper.rlbench_sweeper.RlbenchSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Any] = None


ConfigStore.instance().store(group="hydra/sweeper", name="rlbench", node=RlbenchSweeperConf, provider="rlbench")


class RlbenchSweeper(BasicSweeper):
    def sweep(self, arguments: List[str]) -> Any:
        from rlbench.config.grid import plan, seed_overlap, validate_jobs
        from rlbench.signals import sigterm_raises

        with sigterm_raises():
            if self.config.get("search") is not None:
                from rlbench.search import run_search

                return run_search(self, arguments)
            grid = plan(self, arguments)  # exits 2 on a bad repeats or seed list
            confs = validate_jobs(self, grid.jobs)  # exits 2 before torch and MLflow are imported
            warning = seed_overlap(grid, confs)
            if warning:
                print(f"rlbench: warning: {warning}", file=sys.stderr)
            from rlbench.sweep import run_sweep

            return run_sweep(self, arguments, grid.jobs, confs, grid)
