"""Unrolls from the host to the learner's device, shared by the algorithms' learners (docs/algorithms.md)."""

from __future__ import annotations

import numpy as np
import torch

from rlbench.algo.common.frames import rebuild_stacks


def to_time_major(seqs, device, extra: tuple[str, ...] = ()) -> dict:
    """Unrolls as tensors on the device: frames and head batch-major (the stacks are rebuilt
    there, so only one frame per step crosses), the rest time-major [T, B, ...]; `state` [B, S]."""
    names = ("frames", "head", "prev_action", "reward", "done", "action", *extra)
    out = {n: torch.from_numpy(np.ascontiguousarray(getattr(seqs, n))).to(device, non_blocking=True) for n in names}
    for name in ("prev_action", "reward", "action", *extra):
        out[name] = out[name].transpose(0, 1)
    out["state"] = torch.from_numpy(seqs.state).to(device)
    return out


def rebuild_obs(batch: dict) -> None:
    """In place: `obs` [T, B, ...] from the frames and stack heads; `done` time-major."""
    batch["obs"] = rebuild_stacks(batch.pop("head"), batch.pop("frames"), batch["done"]).transpose(0, 1)
    batch["done"] = batch["done"].transpose(0, 1)
