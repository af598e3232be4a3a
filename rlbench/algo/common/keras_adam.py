"""Keras' Adam (`tf.keras.optimizers.Adam`, the optimiser of every SEED RL learner) on torch.

`KerasAdam` is torch's Adam with its eps set, before each step t, to eps / sqrt(1 - beta2^t):
Keras' "epsilon hat", added to sqrt(v) before the bias correction instead of after it.
The derivation, and why it matters for SEED's eps 1e-3: docs/r2d2.md, "Keras' Adam".
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
