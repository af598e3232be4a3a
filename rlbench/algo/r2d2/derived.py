"""R2D2's replay sizes that follow from the config and the env's shapes (one place each):
the bytes one stored sequence takes, and the capacity when it is given as a memory budget
(docs/r2d2.md, "replay capacity")."""

from __future__ import annotations

import numpy as np

from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import unroll_layout
from rlbench.envs.spec import EnvSpec


def state_size(conf) -> int:
    """Floats of recurrent state stored per sequence: the LSTM's (h, c)."""
    return 2 * conf.algo.network.lstm_hidden


def sequence_bytes(conf, spec: EnvSpec) -> int:
    """Bytes of one stored sequence in replay (frames once per step, the stack head, the rest)."""
    a = conf.algo
    length, _ = unroll_layout(a.burn_in, a.seq_len, a.overlap)
    return SequenceReplay.bytes_per_sequence(
        length, tuple(spec.obs_shape), np.dtype(spec.obs_dtype), spec.num_actions, state_size(conf), stack=spec.stack
    )


def replay_capacity(conf, bytes_per_sequence: int) -> int:
    """Sequences replay keeps: algo.replay_capacity, or as many as algo.replay_memory_gb holds."""
    gb = conf.algo.replay_memory_gb
    if gb is None:
        return conf.algo.replay_capacity
    return int(gb * 1e9 // bytes_per_sequence)
