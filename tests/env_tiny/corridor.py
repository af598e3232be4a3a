"""The corridor: `length` cells, the agent starts on a random cell left of the last one and
moves left (0), stays (1) or moves right (2); reaching the last cell pays 1 and ends the
episode, `max_steps` steps truncate it. Observation [cell / (length - 1), step / max_steps]
as float32. Every env draws its starts from its own generator seeded `seed + i`, so a seed
gives the same episodes; an ended env restarts in the same step (same-step autoreset)."""

from __future__ import annotations

import numpy as np

from rlbench.envs.vector import StepBatch

ACTIONS = 3


class CorridorActors:
    def __init__(self, cfg, num_envs: int):
        self.length, self.max_steps = cfg.length, cfg.max_steps
        self.frameskip = cfg.frameskip
        self.obs_shape, self.obs_dtype, self.num_actions = (2,), np.float32, ACTIONS
        self.threads_used = 1  # stepped in the actors' thread
        self.inference_batch = num_envs  # lock-step (PARTIAL_BATCHES False)
        self._ids = np.arange(num_envs)
        self._rngs: list[np.random.Generator] = []
        self._cell = np.zeros(num_envs, np.int64)
        self._step = np.zeros(num_envs, np.int64)
        self._actions = np.ones(num_envs, np.int64)

    def reset(self, seed: int) -> StepBatch:
        self._rngs = [np.random.default_rng(seed + i) for i in self._ids]
        self._restart(np.ones(len(self._ids), bool))
        n = len(self._ids)
        return StepBatch(self._ids, self._obs(), np.zeros(n, np.float32), np.ones(n, bool))

    def send(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions, np.int64)

    def recv(self) -> StepBatch:
        self._cell = np.clip(self._cell + self._actions - 1, 0, self.length - 1)
        self._step += 1
        reached = self._cell == self.length - 1
        done = reached | (self._step >= self.max_steps)
        self._restart(done)
        return StepBatch(self._ids, self._obs(), reached.astype(np.float32), done)

    def close(self) -> None:
        pass

    def _restart(self, which: np.ndarray) -> None:
        for i in np.flatnonzero(which):
            self._cell[i] = self._rngs[i].integers(0, self.length - 1)
        self._step[which] = 0

    def _obs(self) -> np.ndarray:
        return np.stack([self._cell / (self.length - 1), self._step / self.max_steps], axis=1).astype(np.float32)
