"""The actors' environments behind one send/recv interface (`VectorEnv`), made by the env family
env.kind names (`make_actors`), and the envs per central-inference forward
(`resolve_inference_batch`: -1 is SEED RL's auto, half the envs; a family without partial
batches steps in lock-step). docs/envs.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rlbench.core.env_families import family


@dataclass
class StepBatch:
    """What a batch of actors reports: obs_t, the reward arriving with it, episode start."""

    env_ids: np.ndarray  # [k] int
    obs: np.ndarray  # [k, *obs_shape]
    reward: np.ndarray  # [k] float32
    done: np.ndarray  # [k] bool: obs is the first of a new episode


class VectorEnv(Protocol):
    """Common surface: reset() -> StepBatch, send(actions) for the last batch, recv()."""

    frameskip: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int
    threads_used: int
    inference_batch: int  # envs per recv(): resolve_inference_batch; num_envs = lock-step

    def reset(self, seed: int) -> StepBatch: ...
    def send(self, actions: np.ndarray) -> None: ...
    def recv(self) -> StepBatch: ...
    def close(self) -> None: ...


def resolve_inference_batch(inference_batch: int, num_envs: int, partial: bool = True) -> int:
    """The environments each central-inference forward takes, in [1, num_envs] (num_envs =
    lock-step), for the config's `inference_batch` and the `num_envs` the vector env steps
    (actors plus eval envs: rlbench/prepare/plan.py `envs_of`).

    -1: SEED RL's auto rule (common/utils.py validate_learner_config: inference_batch_size -1
        = max(env_batch_size, num_envs // 2), env_batch_size 1 here, num_envs counting the eval
        envs), so stepping one half of the envs overlaps inference of the other half; with one
        env that is all of them, lock-step.
    0: lock-step: every forward waits for all num_envs.
    k: the first k ready (ale-py AtariVectorEnv's async batch_size); k >= num_envs is lock-step.
    partial=False (a family without PARTIAL_BATCHES, e.g. gymnasium's SyncVectorEnv): always
    lock-step, every value resolves to num_envs."""
    if inference_batch < -1:
        raise ValueError(f"inference_batch={inference_batch}: allowed: -1 (auto), 0 (lock-step) or k >= 1")
    if not partial or inference_batch == 0 or inference_batch >= num_envs:
        return num_envs
    if inference_batch == -1:
        return max(1, num_envs // 2)
    return inference_batch


def make_actors(cfg, num_envs: int, threads: int, batch: int, affinity_offset: int = -1, seed: int = 0) -> VectorEnv:
    """The vector env of cfg's family. `batch`: the config's inference_batch (-1 auto, 0
    lock-step, k), resolved by resolve_inference_batch; the env's `inference_batch` is the result.
    `affinity_offset` >= 0 pins the family's threads (Atari's) to CPUs offset, offset + 1, ...
    `seed`: the one its first reset will get (an engine that seeds its envs when it makes them,
    EnvPool, makes them with it; any other seed works, making them again)."""
    return family(cfg.kind).make(cfg, num_envs, threads, batch, affinity_offset, seed)
