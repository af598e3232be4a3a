"""V-trace's learner: whole unrolls from the FIFO -> V-trace loss -> Keras' Adam (or RMSProp).

Each update takes the oldest `batch_size` unrolls, runs the network over them from each one's
stored recurrent state, minimises SEED RL's loss (math.py) and publishes the weights every
`publish_every` updates; `policy_lag` is how far behind the acting weights were. docs/vtrace.md.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from rlbench.algo.common.batches import rebuild_obs, to_time_major
from rlbench.algo.common.keras_adam import KerasAdam
from rlbench.algo.vtrace.math import loss_terms
from rlbench.algo.vtrace.queue import UnrollQueue
from rlbench.core.precision import Amp, at_least_fp32
from rlbench.roles.contract import SharedNet
from rlbench.roles.learner import LearnerLoop
from rlbench.telemetry.timing import OpTimer


def make_optimizer(params, a) -> torch.optim.Optimizer:
    """SEED's dmlab/vtrace_main.py: tf.keras.optimizers.Adam (epsilon hat: KerasAdam), beta_2 Keras' 0.999."""
    if a.optimizer == "rmsprop":
        return torch.optim.RMSprop(params, lr=a.learning_rate, alpha=a.rmsprop_alpha, eps=a.rmsprop_eps)
    return KerasAdam(params, lr=a.learning_rate, betas=(a.adam_beta1, 0.999), eps=a.adam_eps)


def compute_loss(net, b: dict, a, amp: Amp | None = None) -> dict:
    """SEED's agents/vtrace/learner.py compute_loss: the network runs over the unrolls with
    their raw rewards as its reward input; only the loss sees them clipped to
    [-max_abs_reward, max_abs_reward] (0: not clipped). The unroll runs at `amp`'s precision
    (autocast); its logits and baseline come out fp32 (the heads run in fp32), and the V-trace
    targets, importance weights and the loss terms are computed in fp32, outside autocast."""
    state = net.unflatten_state(b["state"])
    with (amp or Amp()).autocast():
        logits, values, _ = net.unroll(b["obs"], b["prev_action"], b["reward"], b["done"], state)
    logits, values = at_least_fp32(logits), at_least_fp32(values)
    rewards = b["reward"].clamp(-a.max_abs_reward, a.max_abs_reward) if a.max_abs_reward else b["reward"]
    return loss_terms(
        logits,
        values,
        b["agent_out"],
        b["action"],
        rewards,
        b["done"],
        a.discount,
        a.rho_bar,
        a.pg_rho_bar,
        a.lambda_,
        a.baseline_cost,
        a.entropy_cost,
    )


class VTraceLearner(LearnerLoop):
    def __init__(
        self,
        net,
        algo,
        queue: UnrollQueue,
        shared: SharedNet,
        device,
        update_target: int,
        actors_done: threading.Event,
        timer: OpTimer | None = None,
    ):
        super().__init__(update_target, actors_done, timer)
        self.net, self.algo, self.queue, self.shared, self.device = net, algo, queue, shared, device
        self.amp = shared.amp if shared is not None else Amp()  # the job's precision (autocast, fp16 scaling)
        self.optimizer = make_optimizer(net.parameters(), algo)
        decay = (lambda u: max(0.0, 1.0 - u / update_target)) if algo.lr_decay else (lambda u: 1.0)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, decay)
        self.lag_sum, self.lag_n = 0.0, 0
        self.last_terms: dict[str, float] = {}
        if queue is not None:
            queue.on_put = self.wakeup.ring  # what may_update() reads

    def may_update(self) -> bool:
        return self.queue.size >= self.algo.batch_size

    def exhausted(self) -> bool:
        """The actors are done and less than a batch is left: no update will come."""
        return self.actors_done.is_set() and self.queue.size < self.algo.batch_size

    def update(self) -> float:
        a = self.algo
        with self.timer.op("queue_get"):
            seqs, versions = self.queue.take(a.batch_size)
        self.lag_sum += float(np.sum(self.updates - versions))
        self.lag_n += len(versions)
        with self.timer.op("h2d_transfer"):
            b = to_time_major(seqs, self.device, extra=("agent_out",))
        with self.timer.op("stack_rebuild", device=True):
            rebuild_obs(b)
        with self.timer.op("forward_backward", device=True):
            terms = self.gradients(b)
        with self.timer.op("optimizer_step", device=True):
            self.amp.step(self.optimizer)
            self.schedule.step()
            self.updates += 1
        if self.updates % a.publish_every == 0:
            with self.timer.op("publish"):
                self.shared.publish(self.net.state_dict(), self.updates)
        self.last_terms = {k: float(terms[k].detach()) for k in ("policy_loss", "baseline_loss", "entropy")}
        return float(terms["total"].detach())

    def _grads(self, loss_fn, b: dict) -> dict:
        """The loss terms of `loss_fn` (the loss, or its compiled form) with the gradients made."""
        terms = loss_fn(b)
        self.optimizer.zero_grad(set_to_none=True)
        self.amp.backward(terms["total"])
        if self.algo.grad_clip > 0:
            self.amp.unscale(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.algo.grad_clip)
        return terms

    def _loss(self, b: dict) -> dict:
        return compute_loss(self.net, b, self.algo, self.amp)

    def metrics(self) -> dict:
        m = {f"vtrace/{k}": v for k, v in self.last_terms.items()}
        if self.lag_n:
            m["policy_lag"] = self.lag_sum / self.lag_n
        return m
