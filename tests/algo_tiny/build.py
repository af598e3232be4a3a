"""`build(ctx)`: the tiny algorithm's parts, from rlbench's public pieces only."""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

from rlbench.algo.common.unrolls import UnrollAssembler
from rlbench.roles.contract import AlgoContext, AlgoParts
from rlbench.roles.learner import LearnerLoop
from rlbench.telemetry.timing import OpTimer


class Fifo:
    def __init__(self):
        self.rewards: collections.deque = collections.deque()  # one mean reward per unroll
        self.put_total = 0
        self.lock = threading.Lock()
        self.on_put = lambda: None  # the learner's wakeup rings here (LearnerLoop.wakeup)


class RandomActs:
    shared = None  # no network: inference runs no forward

    def __init__(self, num_actions: int, unrolls: UnrollAssembler, fifo: Fifo, seed: int):
        self.num_actions, self.unrolls, self.fifo = num_actions, unrolls, fifo
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n: int, device) -> tuple:
        return ()

    def act(self, ids: np.ndarray, out) -> np.ndarray:
        return self.rng.integers(0, self.num_actions, len(ids)).astype(np.int64)

    def store(self, seqs, timer) -> None:
        with timer.op("queue_put"), self.fifo.lock:
            self.fifo.rewards.extend(np.asarray(seqs.reward, np.float64).mean(axis=1))
            self.fifo.put_total += len(seqs)
        self.fifo.on_put()


class MeanRewardLearner(LearnerLoop):
    def __init__(
        self,
        fifo: Fifo,
        batch_size: int,
        update_s: float,
        update_target: int,
        actors_done: threading.Event,
        timer: OpTimer | None = None,
    ):
        super().__init__(update_target, actors_done, timer)
        self.fifo, self.batch_size, self.update_s = fifo, batch_size, update_s
        fifo.on_put = self.wakeup.ring  # what may_update() reads

    def may_update(self) -> bool:
        return len(self.fifo.rewards) >= self.batch_size

    def exhausted(self) -> bool:
        return self.actors_done.is_set() and len(self.fifo.rewards) < self.batch_size

    def update(self) -> float:
        with self.timer.op("queue_get"), self.fifo.lock:
            batch = [self.fifo.rewards.popleft() for _ in range(self.batch_size)]
        with self.timer.op("forward_backward"):
            loss = float(np.mean(batch))
            time.sleep(self.update_s)
        self.updates += 1
        self.mean_reward = loss
        return loss

    def metrics(self) -> dict:
        return {"tiny/mean_reward": self.mean_reward} if self.updates else {}


def build(ctx: AlgoContext) -> AlgoParts:
    a, spec = ctx.conf.algo, ctx.spec
    unrolls = UnrollAssembler(
        ctx.actors,
        a.unroll_length,
        1,
        tuple(spec.obs_shape),
        np.dtype(spec.obs_dtype),
        spec.num_actions,
        0,
        spec.stack,
    )
    fifo = Fifo()
    policy = RandomActs(spec.num_actions, unrolls, fifo, ctx.conf.seed)
    learner = (
        MeanRewardLearner(
            fifo, a.batch_size, a.update_s, ctx.conf.workload.learner_updates, ctx.actors_done, ctx.timer("learner")
        )
        if ctx.conf.learner
        else None
    )
    return AlgoParts(
        policy,
        learner,
        metrics=lambda final: {"unrolls": fifo.put_total} | ({} if final else {"queue_size": len(fifo.rewards)}),
    )
