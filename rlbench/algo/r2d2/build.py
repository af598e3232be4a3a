"""`build(ctx)`: the r2d2 parts of one job (see rlbench/algo/__init__.py)."""

from __future__ import annotations

import numpy as np

from rlbench.algo.parts import AlgoContext, AlgoParts, SharedNet
from rlbench.algo.r2d2.acting import EpsilonGreedy
from rlbench.algo.r2d2.derived import replay_capacity, sequence_bytes, state_size
from rlbench.algo.r2d2.learner import R2D2Learner
from rlbench.algo.r2d2.network import R2D2Net
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import actor_epsilons, unroll_layout
from rlbench.algo.unrolls import UnrollAssembler


def build(ctx: AlgoContext) -> AlgoParts:
    conf, spec, algo = ctx.conf, ctx.spec, ctx.conf.algo
    length, overlap = unroll_layout(algo.burn_in, algo.seq_len, algo.overlap)
    shapes = (tuple(spec.obs_shape), np.dtype(spec.obs_dtype), spec.num_actions, state_size(conf))
    unrolls = UnrollAssembler(ctx.num_train, length, overlap, *shapes, spec.stack)
    replay = SequenceReplay.for_shapes(
        replay_capacity(conf, sequence_bytes(conf, spec)), length, *shapes, spec.stack,
        alpha=algo.priority_exponent, beta=algo.importance_exponent, seed=conf.seed, prefault=algo.replay_prefault,
    )
    shared = SharedNet(R2D2Net(spec.obs_shape, spec.num_actions, algo.network).to(ctx.device))
    epsilons = np.concatenate([actor_epsilons(ctx.num_train, algo.eps_base, algo.eps_alpha),
                               np.full(ctx.num_eval, conf.eval_epsilon)])
    policy = EpsilonGreedy(shared, unrolls, replay, epsilons, algo, conf.seed)
    learner = may_step = None
    if conf.learner:
        net = R2D2Net(spec.obs_shape, spec.num_actions, algo.network).to(ctx.device)
        net.load_state_dict(shared.net.state_dict())
        learner = R2D2Learner(net, algo, replay, shared, ctx.device, conf.workload.learner_updates,
                              ctx.actors_done, ctx.num_train)
        if algo.rate_limit == "both":
            may_step = learner.actors_may_insert
    return AlgoParts(policy, learner, may_step, lambda final: replay_metrics(replay, final))


def replay_metrics(replay: SequenceReplay, final: bool) -> dict:
    m = {"replay_capacity": replay.capacity, "replay_memory_gb": replay.nbytes() / 1e9} if final else \
        {"replay_size": replay.size}
    if replay.inserted:  # sampled / inserted sequences (unknown before the first insert)
        m["replay_ratio"] = replay.sampled / replay.inserted
    return m
