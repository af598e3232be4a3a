"""Frame stacks stored once: each step's newest frame plus the stack head of a sequence.

`split_stack` keeps the newest frame of every step and the older frames of the first step's
stack; `rebuild_stacks` rebuilds the stacks at sampling, zeroing frames older than the latest
episode start as ale-py does. docs/r2d2.md, "stored observations".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def split_stack(obs: np.ndarray, stack: int) -> tuple[np.ndarray, np.ndarray]:
    """obs [k, *obs_shape] -> (newest frames [k, *frame], heads [k, stack - 1, *frame])."""
    if stack == 1:
        return obs, obs[:, None][:, :0]
    return obs[:, -1], obs[:, :-1]


def frame_shape(obs_shape: tuple[int, ...], stack: int) -> tuple[int, ...]:
    return tuple(obs_shape) if stack == 1 else tuple(obs_shape[1:])


def rebuild_stacks(head: torch.Tensor, frames: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
    """Observations [B, L, stack, *frame] from head [B, stack - 1, *frame], frames [B, L, *frame]
    and done [B, L] (True where the step is the first of an episode). With an empty head
    (stack 1) the frames are the observations."""
    import torch  # lazy: keeps torch off the start (replay and validation use the numpy half)

    k = head.shape[1] + 1
    if k == 1:
        return frames
    B, L = done.shape
    ext = torch.cat([head, frames], dim=1)  # [B, L + k - 1, *frame]; step t's stack is ext[t : t + k]
    obs = ext.unfold(1, k, 1).movedim(-1, 2)  # [B, L, k, *frame]
    steps = torch.arange(L, device=done.device)
    last_start = torch.where(done, steps, torch.full_like(steps, -k)).cummax(dim=1).values  # [B, L]
    frame_time = steps[:, None] - (k - 1) + torch.arange(k, device=done.device)  # [L, k]
    keep = frame_time[None] >= last_start[..., None]  # [B, L, k]
    return obs * keep.reshape(B, L, k, *([1] * (frames.dim() - 2))).to(obs.dtype)
