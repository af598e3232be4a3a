"""The learner: prioritized sequence replay -> R2D2 loss -> Adam, beside the actors.

Burn-in with the stored recurrent state (no gradient), double-Q n-step targets on rescaled
values, importance-weighted loss, mixed max/mean |TD| priorities written back, a periodic
target copy, and weights published to central inference every `publish_every` updates.
The replay ratio (`samples_per_insert`, rlbench.algo.rate_limit) holds the learner back
while actors are running, and with `rate_limit=both` the actors too.
"""

from __future__ import annotations

import copy
import threading

import numpy as np
import torch

from rlbench.algo.frames import rebuild_stacks
from rlbench.algo.r2d2_math import mixed_priority, n_step_double_q_targets, sequence_loss
from rlbench.algo.rate_limit import actors_may_insert, learner_may_update
from rlbench.algo.replay import SequenceReplay
from rlbench.roles.inference import InferenceServer
from rlbench.telemetry.timing import OpTimer


class LearnerRole:
    name = "learner"

    def __init__(self, net, algo, replay: SequenceReplay, inference: InferenceServer, device,
                 update_target: int, actors_done: threading.Event):
        self.net, self.algo, self.replay, self.inference = net, algo, replay, inference
        self.device = device
        self.target = copy.deepcopy(net).requires_grad_(False)
        self.optimizer = torch.optim.Adam(net.parameters(), lr=algo.learning_rate, eps=algo.adam_eps)
        self.update_target = update_target  # the workload's learner_updates
        self.actors_done = actors_done
        self.updates = 0
        self.finished = threading.Event()  # set when the learner leaves run(), for any reason
        self.intra_op_threads: int | None = None
        self.last_loss = float("nan")
        self.timer = OpTimer("learner")

    def run(self, stop: threading.Event) -> None:
        self.intra_op_threads = torch.get_num_threads()  # what sm_limit granted on CPU, seen here
        try:
            while not stop.is_set() and self.updates < self.update_target:
                if not self._may_update():
                    with self.timer.op("wait"):
                        stop.wait(0.005)
                    continue
                self.last_loss = self.update()
        finally:
            self.finished.set()

    def _may_update(self) -> bool:
        a = self.algo
        return learner_may_update(self.updates, a.batch_size, self.replay.inserted, self.replay.size,
                                  a.min_replay, a.samples_per_insert, self.actors_done.is_set())

    def actors_may_insert(self) -> bool:
        """For `rate_limit=both`: the actors' side of the replay ratio (see rlbench.algo.rate_limit)."""
        if self.finished.is_set():
            return True
        a = self.algo
        return actors_may_insert(self.updates, a.batch_size, self.replay.inserted, a.min_replay,
                                 a.samples_per_insert, slack=self.inference.num_train)

    def update(self) -> float:
        with self.timer.op("replay_sample"):
            slots, gens, seqs, weights = self.replay.sample(self.algo.batch_size)
        if not len(slots):  # every row was overwritten while it was copied: sample again
            return self.last_loss
        with self.timer.op("h2d_transfer"):
            batch = _to_time_major(seqs, self.device)
            w = torch.as_tensor(weights, device=self.device)
        with self.timer.op("stack_rebuild", device=True):
            batch["obs"] = rebuild_stacks(batch.pop("head"), batch.pop("frames"), batch["done"]).transpose(0, 1)
            batch["done"] = batch["done"].transpose(0, 1)
        with self.timer.op("forward_backward", device=True):
            loss, priorities = self._loss(batch, w)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.algo.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.algo.grad_clip)
        with self.timer.op("optimizer_step", device=True):
            self.optimizer.step()
            self.updates += 1
            if self.updates % self.algo.target_update == 0:
                self.target.load_state_dict(self.net.state_dict())
        with self.timer.op("replay_update"):
            self.replay.update_priorities(slots, gens, priorities.cpu().numpy())
        if self.updates % self.algo.publish_every == 0:
            with self.timer.op("publish"):
                self.inference.publish(self.net.state_dict(), self.updates)
        return float(loss.detach())

    def _loss(self, b: dict, weights: torch.Tensor):
        """SEED RL's R2D2 loss on [burn_in + seq_len + 1] steps: burn-in from the stored state
        (no gradient), seq_len trained steps, the last step only bootstraps."""
        a, bi = self.algo, self.algo.burn_in
        state = (b["state"][:, 0], b["state"][:, 1])
        inputs = [b["obs"], b["prev_action"], b["reward"], b["done"]]
        head = [x[:bi] for x in inputs]
        tail = [x[bi:] for x in inputs]
        with torch.no_grad():
            s_online = self.net(*head, state)[1] if bi else state
            s_target = self.target(*head, state)[1] if bi else state
            q_target = self.target(*tail, s_target)[0]
        q_online = self.net(*tail, s_online)[0]
        targets = n_step_double_q_targets(
            b["reward"][bi:], b["done"][bi:], q_online.detach(), q_target, a.n_step, a.discount, a.rescale_eps
        )
        taken = q_online[:-1].gather(-1, b["action"][bi:-1].unsqueeze(-1)).squeeze(-1)  # [seq_len, B]
        td = targets - taken
        return sequence_loss(td, weights), mixed_priority(td.detach().abs(), a.priority_eta)


def _to_time_major(seqs, device) -> dict:
    """Sampled sequences as tensors on the device: frames and head batch-major (the stacks
    are rebuilt there, so only one frame per step crosses), the rest time-major [T, B]."""
    out = {n: torch.from_numpy(np.ascontiguousarray(getattr(seqs, n))).to(device, non_blocking=True)
           for n in ("frames", "head", "prev_action", "reward", "done", "action")}
    for name in ("prev_action", "reward", "action"):
        out[name] = out[name].transpose(0, 1)
    out["state"] = torch.from_numpy(seqs.state).to(device)
    return out
