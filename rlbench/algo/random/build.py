"""`build(ctx)`: the random parts of one job (docs/algorithms.md, "What an algorithm package provides")."""

from __future__ import annotations

import numpy as np

from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.roles.contract import AlgoContext, AlgoParts


class UniformRandom:
    shared = None  # no network: inference runs no forward

    def __init__(self, num_actions: int, unrolls: UnrollAssembler, seed: int):
        self.num_actions, self.unrolls, self.rng = num_actions, unrolls, np.random.default_rng(seed)
        self.unrolls_done = 0

    def initial_state(self, n: int, device) -> tuple:
        return ()

    def act(self, ids: np.ndarray, out) -> np.ndarray:
        return self.rng.integers(0, self.num_actions, len(ids)).astype(np.int64)

    def store(self, seqs, timer) -> None:
        self.unrolls_done += len(seqs)  # counted, then dropped: no learner wants them


def build(ctx: AlgoContext) -> AlgoParts:
    a, spec = ctx.conf.algo, ctx.spec
    unrolls = UnrollAssembler(
        ctx.actors,
        a.unroll_length,
        a.overlap,
        tuple(spec.obs_shape),
        np.dtype(spec.obs_dtype),
        spec.num_actions,
        0,
        spec.stack,
    )
    policy = UniformRandom(spec.num_actions, unrolls, ctx.conf.seed)
    return AlgoParts(policy, metrics=lambda final: {"unrolls": policy.unrolls_done})
