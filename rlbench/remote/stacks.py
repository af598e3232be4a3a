"""Frame stacks rebuilt on the job's side, per global env id: actors send the newest frame
only, and the job keeps the last `stack` frames of each env. As ale-py does, the frames
before an episode start are zeros (its reset observation is [0, 0, 0, frame];
rlbench/algo/common/frames.py relies on the same rule), so a remote env's observations equal
a local AtariVectorEnv's with the same stack."""

from __future__ import annotations

import numpy as np


class FrameStacks:
    def __init__(self, num_envs: int, stack: int, frame_shape: tuple[int, ...], dtype: np.dtype):
        self.stack = stack
        self._frames = np.zeros((num_envs, stack, *frame_shape), dtype) if stack > 1 else None

    def push(self, ids: np.ndarray, frames: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Observations [k, stack, *frame] (stack 1: [k, *frame]) after adding each env's newest
        frame; `done`: the frame is the first of an episode, so the older frames become zeros."""
        if self._frames is None:
            return frames.copy()  # frames may view a message's buffer
        s = self._frames
        s[ids, :-1] = s[ids, 1:]  # the right side is gathered (a copy) before the write
        s[ids[done], :-1] = 0
        s[ids, -1] = frames
        return s[ids]
