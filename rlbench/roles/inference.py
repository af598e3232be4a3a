"""Central inference (SEED RL): one batched forward for the actors that are ready.

Owns the acting copy of the network (guarded by its lock; the learner publishes weights
into it), every environment's recurrent state, previous action and exploration epsilon, and
the unroll assembler whose completed sequences it inserts into replay with initial
priorities. Environment ids >= `num_train` are evaluation environments (SEED RL's eval
envs): they act through the same forward with their own epsilon, and are never assembled
into sequences or inserted into replay.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import torch

from rlbench.algo.r2d2_math import mixed_priority, n_step_double_q_targets
from rlbench.algo.replay import SequenceReplay
from rlbench.algo.unrolls import Sequences, UnrollAssembler
from rlbench.envs.vector import StepBatch
from rlbench.telemetry.timing import OpTimer


class InferenceServer:
    def __init__(self, net, device, epsilons, assembler: UnrollAssembler, replay: SequenceReplay,
                 algo, seed: int, policy: str = "r2d2", num_train: int | None = None):
        self.net, self.device, self.algo, self.policy = net, device, algo, policy
        self.epsilons = epsilons  # one per environment: training actors first, then eval envs
        self.num_train = len(epsilons) if num_train is None else num_train
        self.assembler, self.replay = assembler, replay
        n = len(epsilons)
        self.h, self.c = net.initial_state(n, device) if net is not None else (None, None)
        self.prev_action = np.zeros(n, dtype=np.int64)
        self.num_actions = assembler.q.shape[-1]
        self.rng = np.random.default_rng(seed)
        self.lock = threading.Lock()
        self.policy_version = 0
        self.timer = OpTimer("inference")
        self.batches = 0
        self.batch_items = 0
        self.latency_s = 0.0
        self._insert_s = 0.0  # time inside the sink, kept out of "unroll_assembly"

    def publish(self, state_dict, version: int) -> None:
        """Called by the learner: copy new weights in, under the lock."""
        with self.lock:
            self.net.load_state_dict(state_dict)
            self.policy_version = version

    def step(self, batch: StepBatch) -> np.ndarray:
        t0 = time.perf_counter()
        ids = batch.env_ids
        train = ids < self.num_train
        q, states = self._forward(batch, train) if self.policy == "r2d2" else self._no_forward(batch)
        actions = self._explore(ids, q)
        self._assemble(batch, actions, q, states, train)
        self.prev_action[ids] = actions
        self.batches += 1
        self.batch_items += len(ids)
        self.latency_s += time.perf_counter() - t0
        return actions

    def _assemble(self, batch: StepBatch, actions, q, states, train: np.ndarray) -> None:
        """The training environments' step into the unroll assembler (its sink inserts)."""
        t0, inserting = time.perf_counter(), self._insert_s
        rows = slice(None) if train.all() else train
        ids = batch.env_ids[rows]
        self.assembler.add(ids, batch.obs[rows], actions[rows], self.prev_action[ids], batch.reward[rows],
                           batch.done[rows], q[rows], states, sink=self._insert)
        self.timer.add("unroll_assembly", time.perf_counter() - t0 - (self._insert_s - inserting))

    def _forward(self, batch: StepBatch, train: np.ndarray):
        ids_np = batch.env_ids
        with self.timer.op("h2d_transfer"):
            ids = torch.as_tensor(ids_np, device=self.device)
            obs = torch.as_tensor(batch.obs, device=self.device).unsqueeze(0)
            prev = torch.as_tensor(self.prev_action[ids_np], device=self.device).unsqueeze(0)
            reward = torch.as_tensor(batch.reward, device=self.device).unsqueeze(0)
            done = torch.as_tensor(batch.done, device=self.device).unsqueeze(0)
        keep = (~done[0]).float().unsqueeze(-1)
        h, c = self.h[ids] * keep, self.c[ids] * keep
        with self.timer.op("forward", device=True), self.lock, torch.no_grad():
            q, (h1, c1) = self.net(obs, prev, reward, done, (h, c))
        self.h[ids], self.c[ids] = h1, c1
        with self.timer.op("d2h_transfer"):
            need_np = np.zeros(len(ids_np), bool)
            need_np[train] = self.assembler.needs_state(ids_np[train])
            need = torch.as_tensor(need_np, device=self.device)
            states = torch.stack([h[need], c[need]], dim=1).cpu().numpy()
            return q[0].cpu().numpy(), states

    def _no_forward(self, batch: StepBatch):
        """Trivial policy for actor-path benchmarks: no network, uniform random actions."""
        return np.zeros((len(batch.env_ids), self.num_actions), np.float32), None

    def _explore(self, ids: np.ndarray, q: np.ndarray) -> np.ndarray:
        greedy = q.argmax(axis=1)
        explore = self.rng.random(len(ids)) < self.epsilons[ids]
        if self.policy != "r2d2":
            explore[:] = True
        random = self.rng.integers(0, self.num_actions, len(ids))
        return np.where(explore, random, greedy).astype(np.int64)

    def _insert(self, seqs: Sequences) -> None:
        """The assembler's sink: initial priorities, then the copy into replay."""
        t0 = time.perf_counter()
        with self.timer.op("initial_priority"):
            priorities = initial_priorities(seqs, self.algo)
        with self.timer.op("replay_insert"):
            self.replay.insert(seqs, priorities)
        self._insert_s += time.perf_counter() - t0

    def stats(self) -> dict:
        b = max(self.batches, 1)
        return {"inference_batch_mean": self.batch_items / b, "inference_latency_ms": 1e3 * self.latency_s / b,
                "policy_version": self.policy_version}


def initial_priorities(seqs: Sequences, algo) -> np.ndarray:
    """Priorities at insertion from the actors' own Q values (SEED RL): online net as target."""
    q = torch.from_numpy(seqs.q).transpose(0, 1)  # [L, k, A]
    reward = torch.from_numpy(seqs.reward).transpose(0, 1)
    done = torch.from_numpy(seqs.done).transpose(0, 1)
    action = torch.from_numpy(seqs.action).transpose(0, 1)
    q, reward, done, action = q[algo.burn_in:], reward[algo.burn_in:], done[algo.burn_in:], action[algo.burn_in:]
    targets = n_step_double_q_targets(reward, done, q, q, algo.n_step, algo.discount, algo.rescale_eps)
    taken = q[:-1].gather(-1, action[:-1].unsqueeze(-1)).squeeze(-1)  # the seq_len trained steps
    return mixed_priority((targets - taken).abs(), algo.priority_eta).numpy()
