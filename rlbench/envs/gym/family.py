"""The gym family's declarations (docs/envs.md lists what each family declares): any
gymnasium id with a Discrete action space and a 1-D Box observation (CartPole-v1,
Acrobot-v1, `my_package.envs:MyEnv-v0`). Its schema has no fields of its own."""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.config.rules import Rules
from rlbench.config.schema import EnvConfig
from rlbench.envs.gym.probe import gym_spec
from rlbench.envs.gym.vector_env import GymActors

OBSERVATION = "vector"  # float32 1-D observations
PARTIAL_BATCHES = False  # SyncVectorEnv steps all envs together: lock-step, whatever inference_batch is
PACKAGE = "gymnasium"


@dataclass
class Schema(EnvConfig):
    kind: str = "gym"


def rules(env: Schema) -> Rules:
    return {}


def spec(env: Schema):
    return gym_spec(env)


def make(env: Schema, num_envs: int, threads: int, batch: int, affinity_offset: int = -1, seed: int = 0):
    return GymActors(env, num_envs)


def hardware_threads(actor_threads: int | None, cores: int) -> int:
    """1: SyncVectorEnv steps every env in the actors' thread, whatever actor_threads says."""
    return 1


def source_url(env: Schema) -> str:
    return "https://gymnasium.farama.org/"


def overrides(env_id: str) -> str:
    """conf/env/cartpole.yaml composes CartPole-v1 (and picks the vector presets); other ids on top."""
    return "env=cartpole" + ("" if env_id == "CartPole-v1" else f" env.id={env_id}")
