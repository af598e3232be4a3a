"""`build(ctx)`: the V-trace parts of one job (docs/algorithms.md, "What an algorithm package provides")."""

from __future__ import annotations

import numpy as np

from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.algo.vtrace.acting import SoftmaxSample
from rlbench.algo.vtrace.config import queue_capacity
from rlbench.algo.vtrace.learner import VTraceLearner
from rlbench.algo.vtrace.network import VTraceNet
from rlbench.algo.vtrace.queue import UnrollQueue
from rlbench.roles.contract import AlgoContext, AlgoParts, SharedNet


def build(ctx: AlgoContext) -> AlgoParts:
    conf, spec, algo = ctx.conf, ctx.spec, ctx.conf.algo
    shared = SharedNet(ctx.place(VTraceNet(spec.obs_shape, spec.num_actions, algo.network)), ctx.amp)
    state_size = 2 * algo.network.lstm_hidden  # (h, c), or nothing without an LSTM core
    unrolls = UnrollAssembler(
        ctx.actors,
        algo.unroll_length + 1,
        1,
        tuple(spec.obs_shape),
        np.dtype(spec.obs_dtype),
        spec.num_actions,
        state_size,
        spec.stack,
    )
    queue = UnrollQueue(queue_capacity(algo), keep=conf.learner)
    policy = SoftmaxSample(shared, unrolls, queue, ctx.actors, conf.eval_epsilon, conf.seed)
    learner = may_step = None
    if conf.learner:
        net = ctx.place(VTraceNet(spec.obs_shape, spec.num_actions, algo.network))
        net.load_state_dict(shared.net.state_dict())
        learner = VTraceLearner(
            net, algo, queue, shared, ctx.device, conf.workload.learner_updates, ctx.actors_done, ctx.timer("learner")
        )
        learner.use_hot_path(conf.hot_path.learner)

        def may_step():
            return not queue.full() or learner.finished.is_set()  # the actors wait while the FIFO is full

    return AlgoParts(policy, learner, may_step, lambda final: queue_metrics(queue, final))


def queue_metrics(queue: UnrollQueue, final: bool) -> dict:
    return {"unrolls": queue.put_total} if final else {"queue_size": queue.size, "unrolls": queue.put_total}
