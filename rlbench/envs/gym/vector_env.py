"""Gym actors: gymnasium's SyncVectorEnv, every env stepped in the calling thread, in
lock-step, same-step autoreset (as the Atari actors); observations as float32 (docs/envs.md)."""

from __future__ import annotations

import numpy as np

from rlbench.envs.vector import StepBatch


class GymActors:
    def __init__(self, cfg, num_envs: int):
        import gymnasium as gym  # lazy: keeps gymnasium off the start

        self._env = gym.make_vec(
            cfg.id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
        self.frameskip = 1
        self.obs_shape = self._env.single_observation_space.shape
        self.obs_dtype = np.float32
        self.num_actions = int(self._env.single_action_space.n)
        self.threads_used = 1  # SyncVectorEnv steps every env in the calling thread
        self.inference_batch = num_envs  # always lock-step (PARTIAL_BATCHES False)
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

    def settle(self) -> bool:
        """Nothing is ever in flight: recv() steps the envs in the calling thread (envs/shelf.py)."""
        return True

    def close(self) -> None:
        self._env.close()
