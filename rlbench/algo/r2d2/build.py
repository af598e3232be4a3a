"""`build(ctx)`: the r2d2 parts of one job (docs/algorithms.md, "What an algorithm package provides")."""

from __future__ import annotations

import numpy as np

from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.algo.r2d2.acting import EpsilonGreedy
from rlbench.algo.r2d2.derived import replay_capacity, sequence_bytes, state_size
from rlbench.algo.r2d2.learner import R2D2Learner
from rlbench.algo.r2d2.network import R2D2Net
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import actor_epsilons, insertion_batch, unroll_layout, unrolls_for_updates
from rlbench.algo.r2d2.unroll_queue import UnrollQueue
from rlbench.roles.contract import AlgoContext, AlgoParts, SharedNet


def build(ctx: AlgoContext) -> AlgoParts:
    conf, spec, algo = ctx.conf, ctx.spec, ctx.conf.algo
    length, overlap = unroll_layout(algo.burn_in, algo.seq_len, algo.overlap)
    shapes = (tuple(spec.obs_shape), np.dtype(spec.obs_dtype), spec.num_actions, state_size(conf))
    # each actor's first unroll starts with burn_in zero steps, so its first steps are trained (SEED)
    unrolls = UnrollAssembler(ctx.actors, length, overlap, *shapes, spec.stack, pad=algo.burn_in)
    replay = SequenceReplay.for_shapes(
        replay_capacity(conf, sequence_bytes(conf, spec)),
        length,
        *shapes,
        spec.stack,
        alpha=algo.priority_exponent,
        beta=algo.importance_exponent,
        seed=conf.seed,
        prefault=algo.replay_prefault,
    )
    shared = SharedNet(ctx.place(R2D2Net(spec.obs_shape, spec.num_actions, algo.network)), ctx.amp)
    epsilons = np.concatenate(
        [actor_epsilons(ctx.actors, algo.eps_base, algo.eps_alpha), np.full(ctx.num_eval, conf.eval_epsilon)]
    )
    queue = UnrollQueue(algo.unroll_queue_size) if conf.learner and algo.coupling == "unroll_queue" else None
    policy = EpsilonGreedy(shared, unrolls, replay, epsilons, algo, conf.seed, queue)
    learner = may_step = more_data = None
    if conf.learner:
        net = ctx.place(R2D2Net(spec.obs_shape, spec.num_actions, algo.network))
        net.load_state_dict(shared.net.state_dict())
        learner = R2D2Learner(
            net,
            algo,
            replay,
            shared,
            ctx.device,
            conf.workload.learner_updates,
            ctx.actors_done,
            ctx.actors,
            queue,
            ctx.timer("learner"),
        )
        learner.use_hot_path(conf.hot_path.learner)
        if algo.coupling == "rate_limited":
            may_step = learner.actors_may_insert
        if queue is not None:
            more_data = _more_data(queue, learner, conf)
    metrics = ReplayMetrics(replay, learner, queue)
    # replay.ready: its storage is zeroed on a thread of its own, beside the job's other start-up
    return AlgoParts(policy, learner, may_step, metrics, more_data, replay.release, replay.ready)


def _more_data(queue: UnrollQueue, learner: R2D2Learner, conf):
    """The actors step on past the task's frames while the learner's updates still lack fresh
    unrolls (many actors on a short task cut fewer whole unrolls than the frames imply)."""
    a = conf.algo
    need = unrolls_for_updates(
        conf.workload.learner_updates, insertion_batch(a.batch_size, a.samples_per_insert), a.min_replay
    )
    return lambda: queue.put_total < need and not learner.finished.is_set()


class ReplayMetrics:
    """Replay's (and the unroll queue's) metrics; `window/replay_ratio` over the updates that ended
    in the tick's window: sequences sampled / sequences inserted (logged when both moved), from
    the first update on (what replay received before it is its min_replay warm-up, not the ratio)."""

    def __init__(self, replay: SequenceReplay, learner: R2D2Learner | None, queue: UnrollQueue | None):
        self.replay, self.learner, self.queue = replay, learner, queue
        self._last: tuple[int, int] | None = None

    def __call__(self, final: bool) -> dict:
        replay = self.replay
        m = (
            {"replay_capacity": replay.capacity, "replay_memory_gb": replay.nbytes() / 1e9}
            if final
            else {"replay_size": replay.size}
        )
        if replay.inserted:  # sampled / inserted sequences (unknown before the first insert)
            m["replay_ratio"] = replay.sampled / replay.inserted
        if self.queue is not None and not final:
            m["queue_size"] = self.queue.size
        if self.learner is not None and not final and self.learner.first_counts is not None:
            self._last = self._last or self.learner.first_counts
            (inserted, sampled), (i0, s0) = self.learner.counts, self._last
            if inserted > i0 and sampled > s0:
                m["window/replay_ratio"] = (sampled - s0) / (inserted - i0)
                self._last = (inserted, sampled)
        return m
