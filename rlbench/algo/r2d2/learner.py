"""R2D2's learner: prioritized sequence replay -> R2D2 loss -> Adam, beside the actors.

Burn-in from the stored state, double-Q n-step targets on rescaled values, importance-weighted
loss, mixed priorities written back, a periodic target copy, weights published to inference.
How it waits for data under each `algo.coupling`: docs/r2d2.md, "The unroll queue, inside".
"""

from __future__ import annotations

import copy
import threading

import torch

from rlbench.algo.common.batches import rebuild_obs, to_time_major
from rlbench.algo.common.keras_adam import KerasAdam
from rlbench.algo.r2d2.math import mixed_priority, n_step_double_q_targets, sequence_loss
from rlbench.algo.r2d2.rate_limit import actors_may_insert, learner_may_update
from rlbench.algo.r2d2.replay import SequenceReplay
from rlbench.algo.r2d2.sequences import insertion_batch
from rlbench.algo.r2d2.unroll_queue import UnrollQueue
from rlbench.core.precision import Amp, at_least_fp32
from rlbench.roles.contract import SharedNet
from rlbench.roles.learner import LearnerLoop
from rlbench.telemetry.timing import OpTimer


class R2D2Learner(LearnerLoop):
    def __init__(
        self,
        net,
        algo,
        replay: SequenceReplay,
        shared: SharedNet,
        device,
        update_target: int,
        actors_done: threading.Event,
        num_train: int,
        queue: UnrollQueue | None = None,
        timer: OpTimer | None = None,
    ):
        super().__init__(update_target, actors_done, timer)
        self.net, self.algo, self.replay, self.shared = net, algo, replay, shared
        self.device, self.num_train, self.queue = device, num_train, queue
        self.amp = shared.amp if shared is not None else Amp()  # the job's precision (autocast, fp16 scaling)
        self.insert_batch = insertion_batch(algo.batch_size, algo.samples_per_insert)
        self.target = copy.deepcopy(net).requires_grad_(False)
        self.optimizer = KerasAdam(net.parameters(), lr=algo.learning_rate, eps=algo.adam_eps)
        self.counts = (0, 0)  # (sequences inserted, sampled) as of the last update: window/replay_ratio
        self.first_counts: tuple[int, int] | None = None  # ... as of the first (after replay's warm-up fill)
        # what may_update() reads grows in the queue (SEED's coupling) or, without one, in replay
        if queue is not None:
            queue.on_put = self.wakeup.ring
        elif replay is not None:
            replay.on_insert = self.wakeup.ring

    def run(self, stop: threading.Event) -> None:
        try:
            super().run(stop)
        finally:
            if self.queue is not None:
                self.queue.close()

    def may_update(self) -> bool:
        a = self.algo
        if self.queue is not None:  # an insertion batch is waiting, or whatever is left at the end
            return self.queue.size >= self.insert_batch or self.actors_done.is_set()
        return learner_may_update(
            self.updates,
            a.batch_size,
            self.replay.inserted,
            self.replay.size,
            a.min_replay,
            a.samples_per_insert,
            self.actors_done.is_set(),
        )

    def exhausted(self) -> bool:
        """Unroll queue: the actors are done and nothing is left to insert or sample."""
        return self.queue is not None and self.actors_done.is_set() and self.queue.size == 0 and self.replay.size == 0

    def actors_may_insert(self) -> bool:
        """For `coupling=rate_limited`: the actors' side of the replay ratio (rlbench.algo.r2d2.rate_limit)."""
        if self.finished.is_set():
            return True
        a = self.algo
        return actors_may_insert(
            self.updates, a.batch_size, self.replay.inserted, a.min_replay, a.samples_per_insert, slack=self.num_train
        )

    def _feed(self) -> bool:
        """One insertion batch from the unroll queue into replay (what is left, once the actors are
        done); True once replay may be sampled: it has received min_replay unrolls, or no more come."""
        with self.timer.op("queue_get"):
            seqs, priorities = self.queue.take(self.insert_batch)
        if seqs is not None:
            with self.timer.op("replay_insert"):
                self.replay.insert(seqs, priorities)
        no_more = self.actors_done.is_set() and self.queue.size == 0
        return self.replay.size > 0 and (self.replay.inserted >= self.algo.min_replay or no_more)

    def update(self) -> float:
        if self.queue is not None and not self._feed():
            return self.last_loss  # SEED inserts another batch before its first sample
        with self.timer.op("replay_sample"):
            slots, gens, seqs, weights = self.replay.sample(self.algo.batch_size)
        if not len(slots):  # every row was overwritten while it was copied: sample again
            return self.last_loss
        with self.timer.op("h2d_transfer"):
            batch = to_time_major(seqs, self.device)
            w = torch.as_tensor(weights, device=self.device)
        with self.timer.op("stack_rebuild", device=True):
            rebuild_obs(batch)
        with self.timer.op("forward_backward", device=True):
            loss, priorities = self.gradients(batch, w)
        with self.timer.op("optimizer_step", device=True):
            self.amp.step(self.optimizer)
            self.updates += 1
            if self.updates % self.algo.target_update == 0:
                self.target.load_state_dict(self.net.state_dict())
        with self.timer.op("replay_update"):
            self.replay.update_priorities(slots, gens, priorities.cpu().numpy())
        if self.updates % self.algo.publish_every == 0:
            with self.timer.op("publish"):
                self.shared.publish(self.net.state_dict(), self.updates)
        self.counts = (self.replay.inserted, self.replay.sampled)
        if self.first_counts is None:
            self.first_counts = self.counts
        return float(loss.detach())

    def _grads(self, loss_fn, batch: dict, weights: torch.Tensor):
        """(loss, priorities) of `loss_fn` (the loss, or its compiled form) with the gradients made."""
        loss, priorities = loss_fn(batch, weights)
        self.optimizer.zero_grad(set_to_none=True)
        self.amp.backward(loss)
        if self.algo.grad_clip > 0:
            self.amp.unscale(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.algo.grad_clip)
        return loss, priorities

    def _loss(self, b: dict, weights: torch.Tensor):
        """SEED RL's R2D2 loss on [burn_in + seq_len + 1] steps: burn-in from the stored state
        (no gradient), seq_len trained steps, the last step only bootstraps. The forwards run
        at the job's precision (autocast); the Q values they return are fp32 (the heads run in
        fp32), and the targets, value rescaling, TD errors, loss and priorities are computed in
        fp32, outside autocast."""
        a, bi = self.algo, self.algo.burn_in
        state = self.net.unflatten_state(b["state"])
        obs = self.net.torso.prepare(b["obs"])  # scaled once for the four passes below (the same values)
        inputs = [obs, b["prev_action"], b["reward"], b["done"]]
        head = [x[:bi] for x in inputs]
        tail = [x[bi:] for x in inputs]
        with self.amp.autocast():
            with torch.no_grad():
                s_online = self.net(*head, state)[1] if bi else state
                s_target = self.target(*head, state)[1] if bi else state
                q_target = self.target(*tail, s_target)[0]
            q_online = self.net(*tail, s_online)[0]
        q_online, q_target = at_least_fp32(q_online), at_least_fp32(q_target)
        targets = n_step_double_q_targets(
            b["reward"][bi:], b["done"][bi:], q_online.detach(), q_target, a.n_step, a.discount, a.rescale_eps
        )
        taken = q_online[:-1].gather(-1, b["action"][bi:-1].unsqueeze(-1)).squeeze(-1)  # [seq_len, B]
        td = targets - taken
        return sequence_loss(td, weights), mixed_priority(td.detach().abs(), a.priority_eta)
