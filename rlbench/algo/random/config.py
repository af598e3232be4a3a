"""The random algorithm's config: no network, no learner, uniform random actions.

For actor-path benchmarks (pipelines/bench_actor_path.py): the actors, central inference's
dispatch and the unroll assembly (R2D2's Atari layout by default) run as in training, and the
completed unrolls are counted and dropped. docs/algorithms.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.config.rules import Rules, int_at_least

LEARNS = False
ON_POLICY = False  # no learner (as before the declaration: the report counted it with the off-policy side)
PRESETS: dict = {}  # algo=random on every env
METRICS: tuple = ()  # it logs only shared metrics (unrolls: rlbench/core/metrics.py)

OPS = {"inference": ("unroll_assembly",), "learner": ()}


@dataclass
class Schema:
    name: str = "random"  # the algorithm package: rlbench/algo/random/
    unroll_length: int = 121  # steps per assembled unroll (R2D2's Atari sequence: 40 + 80 + 1)
    overlap: int = 41  # steps consecutive unrolls share (R2D2's burn_in + 1)


def rules(c) -> Rules:
    length = c.algo.unroll_length
    return {
        "algo.unroll_length": int_at_least(2),
        "algo.overlap": ((lambda v: 0 <= v <= length // 2), f"an integer in [0, unroll_length // 2 = {length // 2}]"),
    }


def checks(c) -> list[str]:
    return []


def host_checks(c) -> list[str]:
    return []


def task_learner_updates(c) -> int:
    return 0


def task_replay_ratio(c) -> float | None:
    return None


def learner_data(c) -> None:
    return None  # no learner


def profile_overrides(c) -> dict:
    return {}
