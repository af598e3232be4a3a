"""Atari actors on EnvPool (env.engine=envpool): its C++ pool makes the emulators on its own
threads and resets them without reloading the ROM. Same surface and settings as AtariActors
(ale-py); here EnvPool's next-step reset becomes SEED's same-step one, its first stacks get
ale-py's zeros, and a reset with a new seed makes the pool anew (EnvPool seeds at making).
docs/envs.md, "Two engines".
"""

from __future__ import annotations

import numpy as np

from rlbench.core.signals import sigterm_ends_at_once
from rlbench.envs.vector import StepBatch, resolve_inference_batch


def task_id(rom: str) -> str:
    """EnvPool's id of an ALE ROM name: space_invaders -> SpaceInvaders-v5."""
    return "".join(part.capitalize() for part in rom.split("_")) + "-v5"


def envpool_settings(cfg, num_envs: int, threads: int, batch: int, affinity_offset: int, seed: int) -> dict:
    """envpool.make's keywords for cfg's Atari settings (each mapped in docs/envs.md)."""
    return {
        "num_envs": num_envs,
        "batch_size": min(batch, num_envs),  # = num_envs: sync (lock-step)
        "num_threads": threads,
        "thread_affinity_offset": affinity_offset,
        "seed": seed,
        "img_height": cfg.img_size,
        "img_width": cfg.img_size,
        "stack_num": cfg.stack,
        "frame_skip": cfg.frameskip,
        "noop_max": cfg.noop_max,  # EnvPool draws 1..noop_max no-ops, as SEED (rules: >= 1)
        "use_fire_reset": cfg.fire_reset,
        "full_action_space": cfg.full_action_space,
        "repeat_action_probability": cfg.sticky_actions,
        "episodic_life": cfg.episodic_life,
        "reward_clip": cfg.reward_clipping,
        "max_episode_steps": -(-cfg.max_episode_frames // cfg.frameskip),  # agent steps; ale-py ends at the same
        "gray_scale": True,
        "use_inter_area_resize": True,  # cv2's INTER_AREA, as ale-py's preprocessing
        "zero_discount_on_life_loss": False,
    }


class EnvPoolActors:
    def __init__(self, cfg, num_envs: int, threads: int, batch: int, affinity_offset: int = -1, seed: int = 0):
        self.inference_batch = resolve_inference_batch(batch, num_envs)  # envs per recv()
        self._args = (cfg, num_envs, threads, self.inference_batch, affinity_offset)
        self._pool = self._make(seed)
        self.frameskip = cfg.frameskip
        self.obs_shape = tuple(self._pool.observation_space.shape)
        self.obs_dtype = np.uint8
        self.num_actions = int(self._pool.action_space.n)
        self.threads_used = threads
        self.num_envs = num_envs
        self._lockstep = self.inference_batch >= num_envs
        self._ids = np.arange(num_envs, dtype=np.int32)  # the envs the last batch returned
        self._resetting = np.zeros(num_envs, bool)  # ended, its reset step in flight (partial batches)
        self._ended_reward = np.zeros(num_envs, np.float32)  # the ending step's reward, kept until then

    def _make(self, seed: int):
        import envpool  # lazy: keeps envpool off the start

        self._seed, self._fresh = seed, True
        cfg = self._args[0]
        with sigterm_ends_at_once():  # making hundreds of emulators holds the interpreter for seconds
            return envpool.make(task_id(cfg.id), env_type="gymnasium", **envpool_settings(*self._args, seed))

    def reset(self, seed: int) -> StepBatch:
        """The first batch of envs seeded with `seed`; a pool made with another seed, or reset
        before, is made anew (EnvPool cannot reseed)."""
        if not self._fresh or seed != self._seed:
            self._pool.close()
            self._pool = self._make(seed)
        self._fresh = False
        self._resetting[:] = False
        obs, info = self._pool.reset()
        ids = info["env_id"]
        self._ids = ids
        self._blank_history(obs, info["elapsed_step"])
        return StepBatch(ids, obs, np.zeros(len(ids), np.float32), np.ones(len(ids), bool))

    def send(self, actions: np.ndarray) -> None:
        self._pool.send(np.asarray(actions, dtype=np.int32), self._ids)

    def recv(self) -> StepBatch:
        while True:
            obs, reward, terminated, truncated, info = self._pool.recv()
            self._blank_history(obs, info["elapsed_step"])
            batch = self._same_step(info["env_id"], obs, reward.astype(np.float32), terminated | truncated)
            if len(batch.env_ids):  # empty: every env of it ended, their reset steps in flight
                self._ids = batch.env_ids
                return batch

    def _same_step(self, ids, obs, reward, ended) -> StepBatch:
        """EnvPool's next-step reset as SEED's same-step: an ended env reports the next
        episode's first observation, with the ending step's reward and done = True."""
        back = self._resetting[ids]  # reset steps' results: their episodes ended before
        done = back.copy()
        if back.any():
            reward[back] = self._ended_reward[ids[back]]
            self._resetting[ids[back]] = False
        ended = ended & ~back
        if not ended.any():
            return StepBatch(ids, obs, reward, done)
        gone = ids[ended]
        self._pool.send(np.zeros(len(gone), np.int32), gone)  # EnvPool resets an ended env on this step
        if self._lockstep:  # a sync pool returns exactly the envs sent: take their first observations now
            obs = obs.copy()
            first, _, _, _, info = self._pool.recv()
            self._blank_history(first, info["elapsed_step"])
            where = {int(e): i for i, e in enumerate(ids)}
            obs[[where[int(e)] for e in info["env_id"]]] = first
            done[ended] = True
            return StepBatch(ids, obs, reward, done)
        self._ended_reward[gone] = reward[ended]
        self._resetting[gone] = True
        keep = ~ended
        return StepBatch(ids[keep], obs[keep], reward[keep], done[keep])

    def _blank_history(self, obs: np.ndarray, elapsed: np.ndarray) -> None:
        """An episode's first stacks as ale-py's (and SEED's): zeros where no frame of the
        episode is yet (EnvPool repeats its first frame there). obs: <uint8>[k, stack, h, w],
        changed in place; elapsed: <int>[k] the episode's steps so far."""
        stack = obs.shape[1]
        young = elapsed < stack - 1
        if not young.any():
            return
        blank = np.arange(stack)[None, :] < (stack - 1 - elapsed[young])[:, None]  # [young, stack]
        rows = obs[young]
        rows[blank] = 0
        obs[young] = rows

    def settle(self) -> bool:
        """False: a pool cannot serve the next job as a new one would (its seed is fixed when it
        is made, its generators have moved on), so the shelf closes it and the next job makes one
        (envs/shelf.py; docs/results/engines.md measures which is cheaper)."""
        return False

    def close(self) -> None:
        self._pool.close()
