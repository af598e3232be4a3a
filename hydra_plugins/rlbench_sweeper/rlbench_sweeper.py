"""Hydra's basic sweeper, plus rlbench's validation of every job before the first starts.

Hydra composes each job's config before launching (so a bad key or group fails early);
this sweeper also runs rlbench's range checks on every composed job config and reports
all bad jobs at once, before any job, MLflow run, environment or process is created.
"""

import sys
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore


@dataclass
class RlbenchSweeperConf:
    _target_: str = "hydra_plugins.rlbench_sweeper.rlbench_sweeper.RlbenchSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Any] = None


ConfigStore.instance().store(group="hydra/sweeper", name="rlbench", node=RlbenchSweeperConf, provider="rlbench")


class RlbenchSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        from rlbench.config.validate import ConfigError, validate

        loader = self.hydra_context.config_loader
        problems = []
        for overrides in batch:
            cfg = loader.load_sweep_config(master_config=self.config, sweep_overrides=list(overrides))
            try:
                validate(cfg)
            except ConfigError as e:
                problems.append(f"job [{' '.join(overrides)}]: {e}")
        if problems:  # a plain message and exit 2, as for a single run (no Hydra traceback)
            print("rlbench: no job started; invalid jobs in the sweep:\n" + "\n".join(problems), file=sys.stderr)
            sys.exit(2)
