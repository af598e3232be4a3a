"""The tiny algorithm's declarations (rlbench/core/algorithms.py lists what each one declares)."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.algo.common.data import LearnerData
from rlbench.config.rules import Rules, int_at_least
from rlbench.core.metrics import Metric

LEARNS = True
ON_POLICY = True  # each unroll is taken once, in arrival order
PRESETS: dict = {}  # algo=tiny on every env
METRICS = (Metric("tiny/mean_reward", "reward", "tick, final", "mean reward of the last update's batch (tiny)"),)
OPS = {"inference": ("unroll_assembly", "queue_put"), "learner": ("wait", "queue_get", "forward_backward")}


@dataclass
class Schema:
    name: str = "tiny"
    unroll_length: int = 8  # steps per unroll; consecutive unrolls of an actor share one
    batch_size: int = 4  # unrolls per update
    update_s: float = 0.02  # seconds an update costs (a real one is not free: the profile's co-run times the actors
    # beside it, and an update shorter than an actor step would see none)


def rules(c) -> Rules:
    return {
        "algo.unroll_length": int_at_least(2),
        "algo.batch_size": int_at_least(1),
        "algo.update_s": ((lambda v: v >= 0), "a number of seconds >= 0"),
    }


def checks(c) -> list[str]:
    return []


def host_checks(c) -> list[str]:
    return []


def task_unrolls(c) -> int:
    steps_per_actor = c.workload.frames // (c.env.frameskip * c.actors)
    return c.actors * max(0, (steps_per_actor - 1) // (c.algo.unroll_length - 1))


def task_learner_updates(c) -> int:
    return max(1, task_unrolls(c) // c.algo.batch_size)


def task_replay_ratio(c) -> float:
    return c.workload.learner_updates * c.algo.batch_size / max(task_unrolls(c), 1)


def learner_data(c) -> LearnerData:
    a = c.algo
    return LearnerData(a.batch_size, a.unroll_length, a.unroll_length - 1, float(a.batch_size * (a.unroll_length - 1)))


def profile_overrides(c) -> dict:
    return {}
