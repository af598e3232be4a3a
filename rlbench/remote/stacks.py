"""Frame stacks rebuilt on the job's side, per global env id: actors send the newest frame
only, and the job keeps the last `stack` frames of each env. As ale-py does, the frames
before an episode start are zeros (its reset observation is [0, 0, 0, frame];
rlbench/algo/common/frames.py relies on the same rule), so a remote env's observations equal
a local AtariVectorEnv's with the same stack (docs/actors.md)."""

from __future__ import annotations

import numpy as np


class FrameStacks:
    """Per env a ring of `stack` frames and the slot of its newest: a step writes one frame per
    env (and zeroes the others at an episode start) and gathers the stacks oldest first, one
    copy each way (shifting every stack by a frame per step cost the job's driver thread
    about twice the memory traffic)."""

    def __init__(self, num_envs: int, stack: int, frame_shape: tuple[int, ...], dtype: np.dtype):
        self.stack = stack
        self._ring = np.zeros((num_envs, stack, *frame_shape), dtype) if stack > 1 else None
        self._newest = np.full(num_envs, stack - 1, np.int64)  # slot of each env's newest frame
        self._order = np.arange(1, stack + 1)  # slots oldest first, relative to the newest

    def push(self, ids: np.ndarray, frames: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Observations [k, stack, *frame] (stack 1: [k, *frame]) after adding each env's newest
        frame; `done`: the frame is the first of an episode, so the older frames become zeros."""
        if self._ring is None:
            return frames.copy()  # frames may view a message's buffer
        ring, newest = self._ring, (self._newest[ids] + 1) % self.stack
        self._newest[ids] = newest
        if done.any():
            ring[ids[done]] = 0
        ring[ids, newest] = frames
        slots = (newest[:, None] + self._order) % self.stack  # [k, stack], oldest first
        return ring[ids[:, None], slots]
