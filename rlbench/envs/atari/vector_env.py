"""Atari actors: ale-py's C++ AtariVectorEnv, `actors` emulators stepped by `threads` CPU
threads, same-step autoreset (an episode end returns the next episode's first observation, as
SEED RL's actors do). With batch < envs, recv() returns the first `batch` envs that are ready,
so inference never waits for the slowest actor (`resolve_inference_batch`; docs/envs.md).
`settle` receives what is still in flight, so a finished job's env can serve the next (envs/shelf.py).
"""

from __future__ import annotations

import numpy as np

from rlbench.core.signals import sigterm_ends_at_once
from rlbench.envs.vector import StepBatch, resolve_inference_batch


class AtariActors:
    def __init__(self, cfg, num_envs: int, threads: int, batch: int, affinity_offset: int = -1):
        from ale_py.vector_env import AtariVectorEnv  # lazy: keeps ale_py off the start

        self.inference_batch = resolve_inference_batch(batch, num_envs)  # envs per recv()
        with sigterm_ends_at_once():  # creating hundreds of emulators holds the interpreter for seconds
            self._env = self._create(AtariVectorEnv, cfg, num_envs, threads, affinity_offset)
        self.frameskip = cfg.frameskip
        self.obs_shape = self._env.single_observation_space.shape
        self.obs_dtype = np.uint8
        self.num_actions = int(self._env.single_action_space.n)
        self.threads_used = threads
        self.num_envs = num_envs
        self._in_flight = 0  # envs sent (or reset) whose step was not received yet

    def _create(self, vector_env, cfg, num_envs: int, threads: int, affinity_offset: int):
        return vector_env(
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

    def reset(self, seed: int) -> StepBatch:
        if self._in_flight and not self.settle():
            raise RuntimeError(f"{self._in_flight} envs still in flight: a reset would race their steps")
        obs, info = self._env.reset(seed=seed)
        k = len(info["env_id"])
        self._in_flight = self.num_envs - k  # the other envs' resets come with the next recv()s
        return StepBatch(info["env_id"], obs, np.zeros(k, np.float32), np.ones(k, bool))

    def send(self, actions: np.ndarray) -> None:
        self._env.send(actions)
        self._in_flight += len(actions)

    def recv(self) -> StepBatch:
        obs, reward, terminated, truncated, info = self._env.recv()
        self._in_flight -= len(info["env_id"])
        return StepBatch(info["env_id"], obs, reward.astype(np.float32, copy=False), terminated | truncated)

    def settle(self) -> bool:
        """Receive every step still in flight; True once none is. recv() returns whole batches,
        so that is possible only where the batch divides the envs (lock-step always; SEED's auto
        batch, half the envs, where they are even). Once settled, the threads are idle and
        reset(seed) redraws all of an env's state, as in a new env (docs/envs.md)."""
        if self._in_flight % self.inference_batch:
            return False
        while self._in_flight > 0:
            self.recv()
        return True

    def close(self) -> None:
        self._env.close()
