"""What R2D2's central inference does with the network: epsilon-greedy over Q (Ape-X epsilons
per training env, eval_epsilon for evaluation envs), and completed sequences, with initial
priorities computed from the actors' own Q values (SEED RL), into the unroll queue (SEED's
coupling: inference blocks while it is full) or, under coupling=free_running/rate_limited,
straight into replay. docs/r2d2.md."""

from __future__ import annotations

import numpy as np
import torch

from rlbench.algo.common.unrolls import Sequences, UnrollAssembler
from rlbench.algo.r2d2.math import mixed_priority, n_step_targets
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.unroll_queue import UnrollQueue
from rlbench.roles.contract import SharedNet


class EpsilonGreedy:
    def __init__(
        self,
        shared: SharedNet,
        unrolls: UnrollAssembler,
        replay: SequenceReplay,
        epsilons: np.ndarray,
        algo,
        seed: int,
        queue: UnrollQueue | None = None,
    ):
        self.shared, self.unrolls, self.replay, self.algo = shared, unrolls, replay, algo
        self.queue = queue  # SEED's unroll queue, or None: insert into replay directly
        self.epsilons = epsilons  # one per environment: training envs first, then eval envs
        self.rng = np.random.default_rng(seed)

    def initial_state(self, n: int, device) -> tuple:
        return self.shared.net.initial_state(n, device)

    def act(self, ids: np.ndarray, q: np.ndarray) -> np.ndarray:
        greedy = q.argmax(axis=1)
        explore = self.rng.random(len(ids)) < self.epsilons[ids]
        random = self.rng.integers(0, q.shape[1], len(ids))
        return np.where(explore, random, greedy).astype(np.int64)

    def store(self, seqs: Sequences, timer) -> None:
        """The assembler's sink: initial priorities, then the copy into the unroll queue (blocking
        while it is full: op `queue_full_wait`) or into replay."""
        with timer.op("initial_priority"):
            priorities = initial_priorities(seqs, self.algo)
        if self.queue is None:
            with timer.op("replay_insert"):
                self.replay.insert(seqs, priorities)
            return
        with timer.op("queue_put"):
            owned = seqs.owned()  # the assembler's rows are views of its rings
        self.queue.put(owned, priorities, blocked=lambda: timer.op("queue_full_wait"))


def initial_priorities(seqs: Sequences, algo) -> np.ndarray:
    """Priorities at insertion from the actors' own Q values, as SEED RL computes them
    (agents/r2d2/learner.py: compute_loss_and_priorities_from_agent_outputs with the stored
    agent outputs as both networks' outputs): its bootstrap action is the output's `action`,
    which inference has already replaced by the epsilon-greedy one, so the targets bootstrap
    from Q(s, a played), not from the argmax as the learner's double-Q targets do."""
    q = torch.from_numpy(seqs.agent_out).transpose(0, 1)  # [L, k, A]
    reward = torch.from_numpy(seqs.reward).transpose(0, 1)
    done = torch.from_numpy(seqs.done).transpose(0, 1)
    action = torch.from_numpy(seqs.action).transpose(0, 1)
    q, reward, done, action = q[algo.burn_in :], reward[algo.burn_in :], done[algo.burn_in :], action[algo.burn_in :]
    played = q.gather(-1, action.unsqueeze(-1)).squeeze(-1)  # [seq_len + 1, k]
    targets = n_step_targets(reward, done, played, algo.n_step, algo.discount, algo.rescale_eps)
    return mixed_priority((targets - played[:-1]).abs(), algo.priority_eta).numpy()
