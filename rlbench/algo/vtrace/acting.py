"""What V-trace's central inference does with the network: training envs sample their action
from the policy's softmax (SEED RL), evaluation envs act greedily (argmax, with eval_epsilon
random actions, as R2D2's eval envs); completed unrolls, with the behaviour logits they were
acted with, go into the FIFO tagged with the policy version. docs/vtrace.md, "acting"."""

from __future__ import annotations

import numpy as np

from rlbench.algo.common.unrolls import Sequences, UnrollAssembler
from rlbench.algo.vtrace.queue import UnrollQueue
from rlbench.roles.contract import SharedNet


def sample_softmax(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row drawn from softmax(logits) (Gumbel-max: argmax of logits + Gumbel noise)."""
    gumbel = -np.log(-np.log(rng.random(logits.shape)))
    return (logits + gumbel).argmax(axis=1)


class SoftmaxSample:
    def __init__(
        self,
        shared: SharedNet,
        unrolls: UnrollAssembler,
        queue: UnrollQueue,
        num_train: int,
        eval_epsilon: float,
        seed: int,
    ):
        self.shared, self.unrolls, self.queue = shared, unrolls, queue
        self.num_train, self.eval_epsilon = num_train, eval_epsilon
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n: int, device) -> tuple:
        return self.shared.net.initial_state(n, device)

    def act(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        actions = sample_softmax(logits, self.rng)
        evaluating = ids >= self.num_train
        if evaluating.any():
            explore = self.rng.random(len(ids)) < self.eval_epsilon
            random = self.rng.integers(0, logits.shape[1], len(ids))
            greedy = np.where(explore, random, logits.argmax(axis=1))
            actions = np.where(evaluating, greedy, actions)
        return actions.astype(np.int64)

    def store(self, seqs: Sequences, timer) -> None:
        """The assembler's sink: the unrolls into the FIFO (the actors wait while it is full)."""
        with timer.op("queue_put"):
            self.queue.put(seqs, self.shared.version)
