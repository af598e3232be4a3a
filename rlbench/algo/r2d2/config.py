"""R2D2's config: the schema behind `algo.*` when algo.name=r2d2, and its validation rules.

Torch-free: validation imports it to refuse a bad command line before torch loads.
Every default is SEED RL's R2D2 on Atari (agents/r2d2) unless its comment says otherwise
(docs/r2d2.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import psutil

from rlbench.algo.common.checks import torso_checks
from rlbench.algo.common.data import LearnerData
from rlbench.algo.r2d2.derived import replay_capacity, sequence_bytes
from rlbench.algo.r2d2.sequences import fill_insertions, insertion_batch, sequences_per_actor, unroll_layout
from rlbench.config.rules import Rules, int_at_least, one_of
from rlbench.core.metrics import Metric
from rlbench.envs.spec import env_spec

LEARNS = True
ON_POLICY = False  # replay: the learner samples sequences that older policies acted
PRESETS = {"vector": "r2d2_vector"}  # vector observations (gym): the MLP torso (conf/algo/r2d2_vector.yaml)
# Operations it times (rlbench/core/metrics.py OPS): queue_put, queue_full_wait and the learner's
# queue_get/replay_insert under the unroll queue (SEED's coupling); the inference-side
# replay_insert under coupling=free_running/rate_limited
# The metrics it logs beside the shared ones (rlbench/core/metrics.py; docs/metrics.md documents them).
METRICS = (
    Metric("replay_ratio", "samples / sequence", "tick, final", "sequences sampled / sequences inserted (R2D2)"),
    Metric(
        "window/replay_ratio",
        "samples / sequence",
        "tick",
        "sequences sampled / inserted by the learner updates "
        "that ended in the tick's window (R2D2; logged when both moved)",
    ),
    Metric("replay_capacity", "sequences", "final", "sequences replay holds (R2D2)"),
    Metric("replay_memory_gb", "GB", "final", "memory of the replay storage (R2D2)"),
    Metric("replay_size", "sequences", "tick", "sequences in replay (R2D2)"),
)

OPS = {
    "inference": (
        "h2d_transfer",
        "forward",
        "d2h_transfer",
        "unroll_assembly",
        "initial_priority",
        "queue_put",
        "queue_full_wait",
        "replay_insert",
    ),
    "learner": (
        "wait",
        "queue_get",
        "replay_insert",
        "replay_sample",
        "h2d_transfer",
        "stack_rebuild",
        "forward_backward",
        "optimizer_step",
        "replay_update",
        "publish",
    ),
}


@dataclass
class NetworkConfig:
    torso: str = "nature_cnn"  # "nature_cnn" for pixels, "mlp" for vector observations
    mlp_hidden: int = 64  # width of the MLP torso's two layers
    lstm_hidden: int = 512  # LSTM core size
    head_hidden: int = 512  # width of the dueling value and advantage streams


@dataclass
class Schema:
    name: str = "r2d2"  # the algorithm package: rlbench/algo/r2d2/
    network: NetworkConfig = field(default_factory=NetworkConfig)
    # Steps that only warm the recurrent state up, from the state each sequence stores: the one
    # inference held before the sequence's step 0 (the R2D2 paper's). A decision: SEED RL stores
    # the state held before step burn_in and burns in from step 0 with it; rlbench's choice lets
    # the learner reproduce inference's Q values and costs the same (docs/r2d2.md, "Decisions").
    burn_in: int = 40
    seq_len: int = 80  # trained steps per replayed sequence (SEED RL: unroll_length 80 for R2D2 on Atari)
    # Stored sequences hold burn_in + seq_len + 1 steps (the last only bootstraps the last targets).
    # Steps shared by consecutive sequences of one actor; null = burn_in + 1 (SEED RL), so the
    # trained steps tile each actor's stream: every step is trained in exactly one sequence.
    overlap: Optional[int] = None
    n_step: int = 5
    discount: float = 0.997
    rescale_eps: float = 1e-3  # epsilon of the value-rescaling function h
    priority_eta: float = 0.9  # priority = eta * max|td| + (1 - eta) * mean|td|
    priority_exponent: float = 0.9  # alpha
    importance_exponent: float = 0.6  # beta
    # Sequences kept (FIFO once full). SEED RL's flag default is 100 and its published Atari run
    # (gcp/train_atari.sh) 100,000 unrolls: 89 GB with our storage (0.89 MB each). A decision: 2000 Atari
    # sequences (1.8 GB here, frames stored once, stacks rebuilt) hold the default task's 625
    # sequences three times over; algo.replay_memory_gb sizes it by memory instead.
    replay_capacity: int = 2000
    replay_memory_gb: Optional[float] = None  # instead of replay_capacity: as many sequences as fit in this
    replay_prefault: bool = True  # touch replay memory at start, off the actors' path
    # Sequences inserted before the learner samples (SEED: replay_buffer_min_size, 5000 in the
    # published run). A decision: 5000 is 8x the default task's 625 sequences (no update would
    # ever happen); 50 is less than one insertion batch, so learning starts after the first.
    min_replay: int = 50
    # The replay ratio: sequence samples per inserted sequence (SEED RL's `replay_ratio`; the
    # trained steps tile the stream, so per observation the same). 0.75 = SEED's published Atari
    # run (gcp/train_atari.sh); the flag's default is 1.5. 0 = unthrottled (free_running only).
    samples_per_insert: float = 0.75
    # How actors, inference and the learner wait for each other:
    #  "unroll_queue" (SEED RL): inference puts completed unrolls into a bounded queue and blocks
    #    (and the actors with it) while it is full; before each update the learner takes
    #    int(batch_size / samples_per_insert) unrolls from it into replay, then samples a batch.
    #    A decision: in order in the learner's thread, no prefetch (SEED's TF iterator takes,
    #    inserts and samples the next batch during the update; docs/r2d2.md, "Decisions").
    #  "free_running" (not SEED): inference inserts straight into replay and never waits; the
    #    learner is held to the ratio while the actors run and trains on after they stop.
    #  "rate_limited" (not SEED): as free_running, and the actors also wait while they are more
    #    than `actors` sequences ahead of the ratio (Reverb's SampleToInsertRatio idea).
    coupling: str = "unroll_queue"
    unroll_queue_size: int = 100  # unrolls the queue holds (SEED: unroll_queue_max_size, 100)
    batch_size: int = 64
    learning_rate: float = 1e-4  # SEED's published Atari run (the flag's default is 4.8e-4)
    adam_eps: float = 1e-3  # Keras' epsilon (added to sqrt(v) before bias correction), as SEED
    grad_clip: float = 80.0  # global gradient-norm clip (SEED's published run: clip_norm 80; flag 40); 0 = off
    target_update: int = 2500  # learner updates between target-network copies
    publish_every: int = 1  # learner updates between weight copies to central inference
    eps_base: float = 0.4  # Ape-X per-actor epsilon: eps_i = base^(1 + alpha * i / (N - 1))
    eps_alpha: float = 7.0


def rules(c) -> Rules:
    a = c.algo
    length, _ = unroll_layout(a.burn_in, a.seq_len, a.overlap)
    return {
        "algo.network.torso": one_of("nature_cnn", "mlp"),
        "algo.network.mlp_hidden": int_at_least(1),
        "algo.network.lstm_hidden": int_at_least(1),
        "algo.network.head_hidden": int_at_least(1),
        "algo.burn_in": int_at_least(0),
        "algo.n_step": int_at_least(1),
        "algo.seq_len": int_at_least(1),
        "algo.overlap": (
            (lambda v: v is None or a.burn_in + 1 <= v <= length // 2),
            (
                f"null (= burn_in + 1: trained steps tile the stream) or an integer in "
                f"[burn_in + 1 = {a.burn_in + 1}, (burn_in + seq_len + 1) // 2 = {length // 2}]"
            ),
        ),
        "algo.discount": ((lambda v: 0.0 < v <= 1.0), "a number in (0, 1]"),
        "algo.rescale_eps": ((lambda v: v > 0), "a number > 0"),
        "algo.priority_eta": ((lambda v: 0.0 <= v <= 1.0), "a number in [0, 1]"),
        "algo.priority_exponent": ((lambda v: v >= 0), "a number >= 0"),
        "algo.importance_exponent": ((lambda v: v >= 0), "a number >= 0"),
        "algo.replay_capacity": int_at_least(1),
        "algo.replay_memory_gb": ((lambda v: v is None or v > 0), "null (use algo.replay_capacity) or gigabytes > 0"),
        "algo.min_replay": (
            (lambda v: 1 <= v <= a.replay_capacity or a.replay_memory_gb is not None),
            f"an integer in [1, algo.replay_capacity={a.replay_capacity}]",
        ),
        "algo.samples_per_insert": _ratio_rule(a),
        "algo.coupling": one_of(*COUPLINGS),
        "algo.unroll_queue_size": _queue_rule(a),
        "algo.batch_size": int_at_least(1),
        "algo.learning_rate": ((lambda v: v > 0), "a number > 0"),
        "algo.adam_eps": ((lambda v: v > 0), "a number > 0"),
        "algo.grad_clip": ((lambda v: v >= 0), "a number >= 0 (0 = off)"),
        "algo.target_update": int_at_least(1),
        "algo.publish_every": int_at_least(1),
        "algo.eps_base": ((lambda v: 0.0 <= v <= 1.0), "a probability in [0, 1]"),
        "algo.eps_alpha": ((lambda v: v >= 0), "a number >= 0"),
    }


COUPLINGS = ("unroll_queue", "free_running", "rate_limited")


def _ratio_rule(a):
    if a.coupling != "unroll_queue":
        return (lambda v: v >= 0), "a number >= 0 (0 = unthrottled)"
    return (
        (lambda v: 0 < v <= a.batch_size),
        (
            f"a number in (0, algo.batch_size={a.batch_size}] under algo.coupling=unroll_queue (the learner "
            f"inserts int(batch_size / ratio) >= 1 unrolls per update); 0 = unthrottled only with "
            f"algo.coupling=free_running or rate_limited"
        ),
    )


def _queue_rule(a):
    if a.coupling != "unroll_queue" or not 0 < a.samples_per_insert <= a.batch_size:
        return int_at_least(1)
    need = insertion_batch(a.batch_size, a.samples_per_insert)
    return (
        (lambda v: v >= need),
        (
            f"an integer >= the insertion batch int(algo.batch_size / algo.samples_per_insert) = "
            f"int({a.batch_size} / {a.samples_per_insert}) = {need}: the learner takes that many at once"
        ),
    )


def checks(c) -> list[str]:
    """Across keys: the torso fits the env, the task fills a sequence, replay fits in memory."""
    problems = torso_checks(c)
    length, overlap = unroll_layout(c.algo.burn_in, c.algo.seq_len, c.algo.overlap)
    steps_per_actor = c.workload.frames // (c.env.frameskip * c.actors)
    if c.workload.learner_updates is None and c.algo.samples_per_insert <= 0:
        problems.append(
            "workload.learner_updates=None: it follows from the replay ratio, but "
            "algo.samples_per_insert=0 (unthrottled); allowed: set workload.learner_updates"
        )
    trains = c.learner and c.workload.learner_updates != 0
    if trains and sequences_per_actor(steps_per_actor, length, overlap, c.algo.burn_in) < 1:
        need = (length - c.algo.burn_in) * c.env.frameskip * c.actors
        problems.append(
            f"workload.frames={c.workload.frames}: too few for {c.actors} actors to fill one "
            f"sequence of {length} steps each; allowed: >= {need} (or fewer actors)"
        )
    return problems


def host_checks(c) -> list[str]:
    """Replay must fit in the memory this host has free now (it is allocated up front)."""

    if not c.learner:
        return []
    spec = env_spec(c.env)
    per_seq = sequence_bytes(c, spec)
    capacity = replay_capacity(c, per_seq)
    free = psutil.virtual_memory().available
    key = (
        f"algo.replay_memory_gb={c.algo.replay_memory_gb}"
        if c.algo.replay_memory_gb is not None
        else f"algo.replay_capacity={c.algo.replay_capacity}"
    )
    if capacity < 1:
        return [f"{key}: holds no sequence of {per_seq / 1e6:.3f} MB; allowed: at least one sequence"]
    if capacity * per_seq > free:
        return [
            (
                f"{key}: replay needs {capacity * per_seq / 1e9:.2f} GB ({capacity} sequences x "
                f"{per_seq / 1e6:.3f} MB) but this host has {free / 1e9:.2f} GB free; allowed: at most "
                f"{free // per_seq} sequences (or a smaller algo.replay_memory_gb)"
            )
        ]
    if c.algo.min_replay > capacity:
        return [f"algo.min_replay={c.algo.min_replay}: allowed: at most the replay capacity ({capacity} sequences)"]
    return []


def task_learner_updates(c) -> int:
    """frames / frameskip / seq_len sequences (the trained steps tile the stream). Under the
    unroll queue (SEED RL) each update takes one insertion batch of them, the first update
    after fill_insertions batches (SEED's final_iteration is frames / the insertion batch's
    frames); otherwise samples_per_insert samples per sequence / batch_size per update."""
    a = c.algo
    sequences = c.workload.frames / c.env.frameskip / a.seq_len
    if a.coupling == "unroll_queue":
        per_update = insertion_batch(a.batch_size, a.samples_per_insert)
        return max(1, int(sequences // per_update) - fill_insertions(a.min_replay, per_update) + 1)
    return max(1, round(sequences * a.samples_per_insert / a.batch_size))


def task_replay_ratio(c) -> float:
    """The replay ratio the task implies: sampled sequences / the sequences its frames make."""
    sequences = c.workload.frames / c.env.frameskip / c.algo.seq_len
    return c.workload.learner_updates * c.algo.batch_size / sequences


def learner_data(c) -> LearnerData:
    """Sequences of burn_in + seq_len + 1 steps at stride length - overlap (an actor's first
    starts zero-padded: length - burn_in real steps). Under the unroll queue each update takes
    one insertion batch, the first after the fill, and the actors run at most the queue's
    unrolls ahead; otherwise the learner starts at min_replay (and a batch's worth of
    inserts) and takes batch_size / samples_per_insert sequences of data per update."""
    a = c.algo
    length, overlap = unroll_layout(a.burn_in, a.seq_len, a.overlap)
    stride, first_length = length - overlap, length - a.burn_in
    if a.coupling == "unroll_queue":
        per_update = insertion_batch(a.batch_size, a.samples_per_insert)
        first = fill_insertions(a.min_replay, per_update) * per_update
        return LearnerData(first, first_length, stride, float(per_update * stride), queue_unrolls=a.unroll_queue_size)
    first = max(a.min_replay, -(-a.batch_size // a.samples_per_insert) if a.samples_per_insert > 0 else 1)
    return LearnerData(
        int(first),
        first_length,
        stride,
        a.batch_size * stride / a.samples_per_insert if a.samples_per_insert > 0 else 0.0,
    )


def profile_overrides(c) -> dict:
    """Timing the learner alone: min_replay lowered to one batch (no more to wait for), and the
    unroll queue's coupling made free running: inference inserts into replay itself, so the
    actor loop is never held by a full unroll queue (the model applies SEED's coupling through
    learner_data's queue_unrolls)."""
    out = {"min_replay": c.algo.batch_size}
    if c.algo.coupling == "unroll_queue":
        out["coupling"] = "free_running"
    return out
