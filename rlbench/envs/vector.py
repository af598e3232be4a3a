"""The actors' environments behind one send/recv interface.

Atari runs in ale-py's C++ AtariVectorEnv: `actors` emulators stepped by `threads` CPU
threads, same-step autoreset (at an episode end the returned observation is the first of
the next episode, as SEED RL's actors do). With batch < actors it runs asynchronously:
recv() returns the first `batch` environments that are ready, so inference never waits
for the slowest actor. Gym environments (CartPole) run in gymnasium's SyncVectorEnv.
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

    def reset(self, seed: int) -> StepBatch: ...
    def send(self, actions: np.ndarray) -> None: ...
    def recv(self) -> StepBatch: ...
    def close(self) -> None: ...


class AtariActors:
    def __init__(self, cfg: EnvConfig, num_envs: int, threads: int, batch: int, affinity_offset: int = -1):
        from ale_py.vector_env import AtariVectorEnv

        self._env = AtariVectorEnv(
            cfg.id,
            num_envs,
            batch_size=batch if 0 < batch < num_envs else 0,
            num_threads=threads,
            thread_affinity_offset=affinity_offset,
            img_height=cfg.img_size,
            img_width=cfg.img_size,
            stack_num=cfg.stack,
            frameskip=cfg.frameskip,
            noop_max=cfg.noop_max,
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


def make_actors(cfg: EnvConfig, num_envs: int, threads: int, batch: int, affinity_offset: int = -1) -> VectorEnv:
    """`affinity_offset` >= 0 pins the Atari threads to CPUs offset, offset + 1, ..."""
    if cfg.kind == "atari":
        return AtariActors(cfg, num_envs, threads, batch, affinity_offset)
    return GymActors(cfg, num_envs)
