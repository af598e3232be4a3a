"""The actors' environments behind one send/recv interface.

Atari runs in ale-py's C++ AtariVectorEnv: `actors` emulators stepped by `threads` CPU
threads, same-step autoreset (at an episode end the returned observation is the first of
the next episode, as SEED RL's actors do). With batch < envs it runs asynchronously:
recv() returns the first `batch` environments that are ready, so inference never waits
for the slowest actor (`resolve_inference_batch`: the default -1 is SEED RL's auto, half
the envs). Gym environments (CartPole) run in gymnasium's SyncVectorEnv, in lock-step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rlbench.config.schema import EnvConfig


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


class AtariActors:
    def __init__(self, cfg: EnvConfig, num_envs: int, threads: int, batch: int, affinity_offset: int = -1):
        from ale_py.vector_env import AtariVectorEnv

        self.inference_batch = resolve_inference_batch(batch, num_envs, "atari")  # envs per recv()
        self._env = AtariVectorEnv(
            cfg.id,
            num_envs,
            batch_size=self.inference_batch if self.inference_batch < num_envs else 0,  # 0: lock-step
            num_threads=threads,
            thread_affinity_offset=affinity_offset,
            img_height=cfg.img_size,
            img_width=cfg.img_size,
            stack_num=cfg.stack,
            frameskip=cfg.frameskip,
            noop_max=cfg.noop_max + 1,  # ale-py draws 0..noop_max-1 no-ops; SEED 1..noop_max (schema)
            use_fire_reset=cfg.fire_reset,
            full_action_space=cfg.full_action_space,
            repeat_action_probability=cfg.sticky_actions,
            episodic_life=cfg.episodic_life,
            reward_clipping=cfg.reward_clipping,
            max_num_frames_per_episode=cfg.max_episode_frames,
            autoreset_mode="SameStep",
        )
        self.frameskip = cfg.frameskip
        self.obs_shape = self._env.single_observation_space.shape
        self.obs_dtype = np.uint8
        self.num_actions = int(self._env.single_action_space.n)
        self.threads_used = threads

    def reset(self, seed: int) -> StepBatch:
        obs, info = self._env.reset(seed=seed)
        k = len(info["env_id"])
        return StepBatch(info["env_id"], obs, np.zeros(k, np.float32), np.ones(k, bool))

    def send(self, actions: np.ndarray) -> None:
        self._env.send(actions)

    def recv(self) -> StepBatch:
        obs, reward, terminated, truncated, info = self._env.recv()
        return StepBatch(info["env_id"], obs, reward.astype(np.float32, copy=False), terminated | truncated)

    def close(self) -> None:
        self._env.close()


class GymActors:
    def __init__(self, cfg: EnvConfig, num_envs: int):
        import gymnasium as gym

        self._env = gym.make_vec(
            cfg.id, num_envs=num_envs, vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
        self.frameskip = 1
        self.obs_shape = self._env.single_observation_space.shape
        self.obs_dtype = np.float32
        self.num_actions = int(self._env.single_action_space.n)
        self.threads_used = 1  # SyncVectorEnv steps every env in the calling thread
        self.inference_batch = num_envs  # always lock-step (resolve_inference_batch)
        self._ids = np.arange(num_envs)
        self._actions: np.ndarray | None = None

    def reset(self, seed: int) -> StepBatch:
        obs, _ = self._env.reset(seed=seed)
        n = len(self._ids)
        return StepBatch(self._ids, obs.astype(np.float32), np.zeros(n, np.float32), np.ones(n, bool))

    def send(self, actions: np.ndarray) -> None:
        self._actions = actions

    def recv(self) -> StepBatch:
        obs, reward, terminated, truncated, _ = self._env.step(self._actions)
        return StepBatch(self._ids, obs.astype(np.float32), reward.astype(np.float32), terminated | truncated)

    def close(self) -> None:
        self._env.close()


def resolve_inference_batch(inference_batch: int, num_envs: int, kind: str = "atari") -> int:
    """The environments each central-inference forward takes, in [1, num_envs] (num_envs =
    lock-step), for the config's `inference_batch` and the `num_envs` the vector env steps
    (actors plus eval envs: `job_envs`).

    -1: SEED RL's auto rule (common/utils.py validate_learner_config: inference_batch_size -1
        = max(env_batch_size, num_envs // 2), env_batch_size 1 here, num_envs counting the eval
        envs), so stepping one half of the envs overlaps inference of the other half; with one
        env that is all of them, lock-step.
    0: lock-step: every forward waits for all num_envs.
    k: the first k ready (ale-py AtariVectorEnv's async batch_size); k >= num_envs is lock-step.
    Gym envs (gymnasium's SyncVectorEnv) always step in lock-step: every value resolves to
    num_envs there."""
    if inference_batch < -1:
        raise ValueError(f"inference_batch={inference_batch}: allowed: -1 (auto), 0 (lock-step) or k >= 1")
    if kind != "atari" or inference_batch == 0 or inference_batch >= num_envs:
        return num_envs
    if inference_batch == -1:
        return max(1, num_envs // 2)
    return inference_batch


def job_envs(conf) -> int:
    """The envs a job's actors step, as build_trainer makes them: `actors` plus `eval_envs`
    when the algorithm learns (evaluation measures a learned policy)."""
    from rlbench.algo import config_module

    return conf.actors + (conf.eval_envs if config_module(conf.algo.name).LEARNS else 0)


def job_inference_batch(conf) -> int:
    """resolve_inference_batch for a job's config: envs per central-inference forward."""
    return resolve_inference_batch(conf.inference_batch, job_envs(conf), conf.env.kind)


def make_actors(cfg: EnvConfig, num_envs: int, threads: int, batch: int, affinity_offset: int = -1) -> VectorEnv:
    """`batch`: the config's inference_batch (-1 auto, 0 lock-step, k), resolved by
    resolve_inference_batch; the env's `inference_batch` is the result.
    `affinity_offset` >= 0 pins the Atari threads to CPUs offset, offset + 1, ..."""
    if cfg.kind == "atari":
        return AtariActors(cfg, num_envs, threads, batch, affinity_offset)
    return GymActors(cfg, num_envs)
