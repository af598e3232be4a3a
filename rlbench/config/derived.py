"""Values that follow from the config (and the env's shapes): one place computes each.

- the learner updates of the task, when the workload leaves them to the replay ratio;
- the replay capacity, when it is given as a memory budget, and the bytes it takes.
"""

from __future__ import annotations

import numpy as np

from rlbench.algo.r2d2_sequences import unroll_layout
from rlbench.algo.replay import SequenceReplay
from rlbench.config.schema import Config
from rlbench.envs.spec import EnvSpec


def task_learner_updates(conf: Config) -> int:
    """workload.learner_updates, or (null) what the frames and the replay ratio imply:
    frames / frameskip / seq_len sequences (trained steps tile the stream) x samples_per_insert
    samples per sequence / batch_size samples per update."""
    w, a = conf.workload, conf.algo
    if w.learner_updates is not None:
        return w.learner_updates
    sequences = w.frames / conf.env.frameskip / a.seq_len
    return max(1, round(sequences * a.samples_per_insert / a.batch_size))


def task_replay_ratio(conf: Config) -> float:
    """The replay ratio the task implies: sampled sequences / the sequences its frames make."""
    sequences = conf.workload.frames / conf.env.frameskip / conf.algo.seq_len
    return task_learner_updates(conf) * conf.algo.batch_size / sequences


def sequence_bytes(conf: Config, spec: EnvSpec) -> int:
    """Bytes of one stored sequence in replay (frames once per step, the stack head, the rest)."""
    a = conf.algo
    length, _ = unroll_layout(a.burn_in, a.seq_len, a.overlap)
    return SequenceReplay.bytes_per_sequence(length, tuple(spec.obs_shape), np.dtype(spec.obs_dtype),
                                             spec.num_actions, a.network.lstm_hidden, stack=spec.stack)


def replay_capacity(conf: Config, bytes_per_sequence: int) -> int:
    """Sequences replay keeps: algo.replay_capacity, or as many as algo.replay_memory_gb holds."""
    gb = conf.algo.replay_memory_gb
    if gb is None:
        return conf.algo.replay_capacity
    return int(gb * 1e9 // bytes_per_sequence)
