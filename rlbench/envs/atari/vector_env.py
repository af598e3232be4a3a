"""Atari actors: ale-py's C++ AtariVectorEnv, `actors` emulators stepped by `threads` CPU
threads, same-step autoreset (an episode end returns the next episode's first observation, as
SEED RL's actors do). With batch < envs, recv() returns the first `batch` envs that are ready,
so inference never waits for the slowest actor (`resolve_inference_batch`; docs/envs.md).
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
