"""rlbench's Hydra sweeper: Hydra's basic grid expansion, run the rlbench way.

Every job is composed and validated before the first starts; the sweep gets one MLflow
parent run; a failing job does not stop the others. The logic lives in rlbench.sweeps.sweep.
"""

import sys
from dataclasses import dataclass
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore

from rlbench.prepare.hydra_private import basic_sweeper


@dataclass
class RlbenchSweeperConf:
    _target_: str = "hydra_plugins.rlbench_sweeper.rlbench_sweeper.RlbenchSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Any] = None


ConfigStore.instance().store(group="hydra/sweeper", name="rlbench", node=RlbenchSweeperConf, provider="rlbench")


class RlbenchSweeper(basic_sweeper()):  # Hydra's grid sweeper, run the rlbench way
    def sweep(self, arguments: List[str]) -> Any:
        from rlbench.core.errors import carried
        from rlbench.core.signals import sigterm_raises
        from rlbench.prepare.grid import grid_of, seed_overlap, validate_jobs

        with carried(), sigterm_raises():  # a typed error, carried through Hydra: the command's line, the API's raise
            self._launcher_or_exit()
            if self.config.get("search") is not None:
                from rlbench.searches.run import run_search

                return run_search(self, arguments)
            grid = grid_of(self, arguments)  # a Refusal (exit 2) on a bad repeats or seed list
            confs = validate_jobs(self, grid.jobs)  # refused before torch and MLflow are imported
            warning = seed_overlap(grid, confs)
            if warning:
                print(f"rlbench: warning: {warning}", file=sys.stderr)
            if any(c.dry_run for c in confs):
                return self._dry_run(grid.jobs, confs)
            from rlbench.sweeps.sweep import run_grid

            return run_grid(self, arguments, grid.jobs, confs, grid)

    def _launcher_or_exit(self) -> None:
        """A launcher this host cannot use is refused before any job (a dry run needs none)."""
        from rlbench.core.errors import Refusal
        from rlbench.prepare.plan import launcher_problem

        problem = (
            None if self.config.get("dry_run") else launcher_problem(self.config.hydra.launcher.get("_target_", ""))
        )
        if problem:
            raise Refusal(problem)

    def _dry_run(self, jobs: List[List[str]], confs: list) -> Any:
        """dry_run=true: print the SLURM submission (rlbench/sweeps/submission.py); exit 2 on another launcher."""
        from omegaconf import OmegaConf

        from rlbench.core.errors import Refusal
        from rlbench.sweeps.submission import dry_run_text, refusal

        launcher = OmegaConf.to_container(self.config.hydra.launcher, resolve=True)
        problem = refusal(launcher)
        if problem:
            raise Refusal(problem)
        print(
            f"[rlbench dry run] {len(jobs)} jobs, nothing submitted; the sbatch scripts submitit would submit:",
            flush=True,
        )
        print(dry_run_text(launcher, str(self.config.hydra.sweep.dir), jobs, confs), flush=True)
        return []
