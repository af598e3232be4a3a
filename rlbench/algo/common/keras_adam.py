"""Keras' Adam (`tf.keras.optimizers.Adam`, the optimiser of every SEED RL learner) on torch.

Keras' epsilon is "epsilon hat" (Kingma and Ba, the formula before section 2.1): TF 2.4's
keras/optimizer_v2/adam.py `_prepare_local` computes, with t = iterations + 1,

    lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)

and the ResourceApplyAdam kernel then does

    m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  var -= lr_t * m / (sqrt(v) + eps)

torch.optim.Adam adds eps after the bias correction of v instead:
var -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). The two agree exactly
when torch's eps at step t is eps / sqrt(1 - beta2^t), which `KerasAdam` sets on each group
before each step; everything else (moments, bias corrections, foreach or fused kernels) is
torch's. The difference matters for large eps: SEED's R2D2 uses 1e-3, which torch would
make ~32x smaller at the first step (sqrt(1 - 0.999) = 0.032).

t is torch's own step count of the group's first parameter plus one: torch counts steps per
parameter and Keras per optimiser, which agree while every parameter gets a gradient at every
step (as in rlbench's learners).
"""

from __future__ import annotations

import math

import torch


class KerasAdam(torch.optim.Adam):
    """torch.optim.Adam with Keras' epsilon: `eps` is Keras' `epsilon` (epsilon hat)."""

    def step(self, closure=None):
        for group in self.param_groups:
            eps_hat = group.setdefault("eps_hat", group["eps"])  # the constructor's eps, kept once
            first = next((p for p in group["params"] if p.grad is not None), None)
            if first is None:
                continue
            state = self.state.get(first)
            t = int(state["step"]) + 1 if state else 1
            _, beta2 = group["betas"]
            group["eps"] = eps_hat / math.sqrt(1.0 - beta2**t)
        return super().step(closure)
