"""KerasAdam (rlbench/algo/common/keras_adam.py) against Keras' Adam update written out in numpy.

The reference is TF 2.4's keras/optimizer_v2/adam.py + the ResourceApplyAdam kernel, with
t = iterations + 1: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t); m = b1 m + (1 - b1) g;
v = b2 v + (1 - b2) g^2; var -= lr_t m / (sqrt(v) + eps).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlbench.algo.common.keras_adam import KerasAdam


def keras_adam(x0: np.ndarray, grads: list[np.ndarray], lr, b1, b2, eps) -> np.ndarray:
    x, m, v = x0.astype(np.float64).copy(), np.zeros_like(x0, np.float64), np.zeros_like(x0, np.float64)
    for i, g in enumerate(grads):
        t = i + 1
        lr_t = lr[i] * np.sqrt(1 - b2**t) / (1 - b1**t)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        x = x - lr_t * m / (np.sqrt(v) + eps)
    return x


def run_torch(opt_cls, x0, grads, lr, b1, b2, eps, dtype, **kwargs) -> np.ndarray:
    p = torch.nn.Parameter(torch.tensor(x0, dtype=dtype))
    opt = opt_cls([p], lr=lr[0], betas=(b1, b2), eps=eps, **kwargs)
    for i, g in enumerate(grads):
        for group in opt.param_groups:
            group["lr"] = lr[i]  # as a scheduler would
        p.grad = torch.tensor(g, dtype=dtype)
        opt.step()
    return p.detach().double().numpy()


def problem(seed=0, steps=12, scale=1e-2):
    rng = np.random.default_rng(seed)
    x0 = rng.normal(size=(5, 3))
    grads = [scale * rng.normal(size=(5, 3)) for _ in range(steps)]
    lr = [1e-3 * (1 - i / steps) for i in range(steps)]  # a linear decay, as SEED's PolynomialDecay
    return x0, grads, lr


@pytest.mark.parametrize("b1, eps", [(0.9, 1e-3), (0.0, 3.125e-7), (0.9, 1e-8), (0.0, 0.1)])
@pytest.mark.parametrize("foreach", [False, True])
def test_keras_adam_is_the_keras_update(b1, eps, foreach):
    x0, grads, lr = problem()
    want = keras_adam(x0, grads, lr, b1, 0.999, eps)
    got = run_torch(KerasAdam, x0, grads, lr, b1, 0.999, eps, torch.float64, foreach=foreach)
    np.testing.assert_allclose(got - x0, want - x0, rtol=1e-9, atol=0)  # the moves, not just the positions
    got32 = run_torch(KerasAdam, x0, grads, lr, b1, 0.999, eps, torch.float32, foreach=foreach)
    np.testing.assert_allclose(got32, want, rtol=1e-6, atol=1e-7)


def test_plain_torch_adam_is_not_the_keras_update_with_a_large_eps():
    """Without the per-step eps, torch's Adam moves differently (R2D2's eps 1e-3): the test above can fail."""
    x0, grads, lr = problem()
    want = keras_adam(x0, grads, lr, 0.9, 0.999, 1e-3)
    plain = run_torch(torch.optim.Adam, x0, grads, lr, 0.9, 0.999, 1e-3, torch.float64)
    moved, keras_moved = np.abs(plain - x0), np.abs(want - x0)
    assert np.max(np.abs(plain - want) / keras_moved) > 0.5  # gradients ~1e-2: eps matters a lot
    assert moved.mean() > 2 * keras_moved.mean()  # torch's eps is effectively ~1/32 of Keras' at the start


def test_keras_adam_keeps_eps_hat_across_steps_and_in_its_state_dict():
    x0, grads, _ = problem(steps=3)
    p = torch.nn.Parameter(torch.tensor(x0))
    opt = KerasAdam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-3)
    for t, g in enumerate(grads, start=1):
        p.grad = torch.tensor(g)
        opt.step()
        assert opt.param_groups[0]["eps"] == pytest.approx(1e-3 / np.sqrt(1 - 0.999**t), rel=1e-12)
    assert opt.state_dict()["param_groups"][0]["eps_hat"] == 1e-3
