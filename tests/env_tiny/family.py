"""The tiny family's declarations (rlbench/core/env_families.py lists what each family declares)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlbench.config.rules import Rules, int_at_least
from rlbench.config.schema import EnvConfig
from rlbench.envs.spec import EnvIdError, EnvSpec

OBSERVATION = "vector"
PARTIAL_BATCHES = False
PACKAGE = "numpy"
IDS = ("corridor",)


@dataclass
class Schema(EnvConfig):
    kind: str = "tiny"
    id: str = "corridor"
    length: int = 5  # cells; the last one is the goal
    max_steps: int = 20  # steps before an episode is truncated


def rules(env: Schema) -> Rules:
    return {"env.length": int_at_least(2), "env.max_steps": int_at_least(1)}


def spec(env: Schema) -> EnvSpec:
    if env.id not in IDS:
        raise EnvIdError(f"env.id={env.id}: the tiny family has {', '.join(IDS)}")
    from tests.env_tiny.corridor import ACTIONS

    return EnvSpec((2,), np.dtype(np.float32), ACTIONS, 1, (2,))


def make(env: Schema, num_envs: int, threads: int, batch: int, affinity_offset: int = -1, seed: int = 0):
    from tests.env_tiny.corridor import CorridorActors

    return CorridorActors(env, num_envs)


def hardware_threads(actor_threads: int | None, cores: int) -> int:
    return 1


def source_url(env: Schema) -> str:
    return f"https://example.org/rlbench-tiny/{env.id}"


def overrides(env_id: str) -> str:
    return "env=tiny" + ("" if env_id == Schema.id else f" env.id={env_id}")
