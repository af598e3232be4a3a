"""The algorithms rlbench measures, one package each: rlbench/algo/<name>/.

Choosing `algo=<name>` (conf/algo/<preset>.yaml, whose `name` is the package) chooses the
network, what central inference does with its output, what an unroll carries, the buffer
between inference and the learner, the learner and the config schema with its rules. The
generic roles (actors, central inference, the runner, telemetry, tracking) know none of it.
What a package must provide (docs/algorithms.md tells the longer story):

- `<name>/config.py`, torch-free (a bad command line is refused before torch loads):
  `Schema` (the dataclass behind `algo.*`; registered as `schema/algo/<name>`),
  `LEARNS` (whether it trains a network: evaluation envs run only then),
  `rules(conf)` -> {dotted key: (ok(value), what is allowed)},
  `checks(conf)` -> problems across keys or with this host ("<key>=<value>: ..."),
  `task_learner_updates(conf)` -> the updates a task needs when the workload leaves them null,
  `task_replay_ratio(conf)` -> samples per unroll the task implies (None: no learner).
- `<name>/build.py`: `build(ctx: AlgoContext) -> AlgoParts` (rlbench/algo/parts.py).
  (`<name>/__init__.py` stays empty of imports, so that importing config.py loads no torch.)
"""

from __future__ import annotations

import importlib
from types import ModuleType

ALGORITHMS = ("r2d2", "vtrace", "random")


def config_module(name: str) -> ModuleType:
    """The torch-free config module of algorithm `name` (one of ALGORITHMS)."""
    if name not in ALGORITHMS:
        raise KeyError(name)
    return importlib.import_module(f"rlbench.algo.{name}.config")


def algorithm(name: str) -> ModuleType:
    """The algorithm's build module (imports torch): its `build(ctx)`."""
    if name not in ALGORITHMS:
        raise KeyError(name)
    return importlib.import_module(f"rlbench.algo.{name}.build")
