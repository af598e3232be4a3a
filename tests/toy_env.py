"""A user's own gymnasium env, registered on import: reachable as `tests.toy_env:RlbenchToy-v0`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

EPISODE = 5  # steps per episode


class ToyEnv(gym.Env):
    """obs = [t, action, 0, 0] at step t; reward 1 per step; terminates after EPISODE steps."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self._t += 1
        obs = np.array([self._t, action, 0, 0], np.float32)
        return obs, 1.0, self._t >= EPISODE, False, {}


class ToyPixels(ToyEnv):
    """ToyEnv with 2-D observations: refused by env.kind=gym (its MLP torso takes vectors)."""

    observation_space = gym.spaces.Box(0, 255, (8, 8), np.uint8)

    def reset(self, *, seed=None, options=None):
        return np.zeros((8, 8), np.uint8), super().reset(seed=seed)[1]


for env_id, cls in [("RlbenchToy-v0", ToyEnv), ("RlbenchToyPixels-v0", ToyPixels)]:
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=cls)
