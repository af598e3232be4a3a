"""R2D2's numpy math: how actors' streams are cut into sequences, how much each actor explores,
and how replay weights its samples. Free of torch on purpose: config validation uses it, and a
bad command line should be refused in about a second, before torch is imported. The tensor math
is in rlbench/algo/r2d2/math.py. docs/r2d2.md.
"""

from __future__ import annotations

import numpy as np


def unroll_layout(burn_in: int, seq_len: int, overlap: int | None) -> tuple[int, int]:
    """(length, overlap) of the stored sequences, as SEED RL cuts its unrolls.

    A sequence holds burn_in + seq_len + 1 steps: the burn-in, the seq_len trained steps and
    one more to bootstrap the last target from. overlap None = burn_in + 1, so consecutive
    sequences of one actor share exactly the burn-in plus that step and their trained steps
    tile the stream (stride = seq_len).
    """
    length = burn_in + seq_len + 1
    return length, burn_in + 1 if overlap is None else overlap


def importance_weights(probs: np.ndarray, size: int, beta: float) -> np.ndarray:
    """w_i = (size * P(i))^-beta, normalised by the batch maximum (weights in (0, 1])."""
    w = (size * np.asarray(probs, dtype=np.float64)) ** (-beta)
    return (w / w.max()).astype(np.float32)


def actor_epsilons(num_actors: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X per-actor exploration: eps_i = base^(1 + alpha i / (N - 1)); N = 1 gives [base]."""
    if num_actors == 1:
        return np.array([base], dtype=np.float64)
    i = np.arange(num_actors, dtype=np.float64)
    return base ** (1.0 + alpha * i / (num_actors - 1))


def sequence_starts(num_steps: int, length: int, overlap: int) -> list[int]:
    """Start indices of the complete sequences cut from one actor's stream of num_steps steps.

    Consecutive sequences of `length` steps share `overlap` steps (stride = length - overlap).
    """
    stride = length - overlap
    if num_steps < length:
        return []
    return list(range(0, num_steps - length + 1, stride))


def sequences_per_actor(agent_steps: int, length: int, overlap: int, pad: int = 0) -> int:
    """How many complete sequences one actor yields from agent_steps steps; its first sequence
    starts with `pad` zero steps (SEED RL pads the burn-in), so it needs only length - pad."""
    first = length - pad
    if agent_steps < first:
        return 0
    return 1 + (agent_steps - first) // (length - overlap)


def insertion_batch(batch_size: int, samples_per_insert: float) -> int:
    """Unrolls the learner moves from the unroll queue into replay before each update: SEED
    RL's get_replay_insertion_batch_size, int(batch_size / replay_ratio); 0 if unthrottled."""
    return int(batch_size / samples_per_insert) if samples_per_insert > 0 else 0


def fill_insertions(min_replay: int, insert_batch: int) -> int:
    """Insertion batches before the first update: SEED's data thread inserts until replay has
    received min_replay unrolls, then samples; each later update follows one insertion."""
    return max(1, -(-min_replay // insert_batch))


def unrolls_for_updates(updates: int, insert_batch: int, min_replay: int) -> int:
    """Unrolls the learner takes from the unroll queue to make `updates` updates."""
    if updates <= 0:
        return 0
    return (updates + fill_insertions(min_replay, insert_batch) - 1) * insert_batch
