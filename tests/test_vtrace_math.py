"""V-trace math (rlbench/algo/vtrace/math.py) against hand-computed values."""

import math

import pytest
import torch

from rlbench.algo.vtrace.math import action_log_probs, categorical_entropy, loss_terms, vtrace_targets


def col(values):
    """[T] python floats -> a [T, 1] float64 tensor (one batch column)."""
    return torch.tensor(values, dtype=torch.float64).unsqueeze(1)


# The 3-step case of the first tests: rhos 0.5 (< 1), 2.0 (> 1, truncated to 1), 0.8.
RHOS = [0.5, 2.0, 0.8]
V = [1.0, 2.0, 3.0]
BOOT = 4.0
R = [1.0, 0.0, 2.0]
G = 0.9


def three_step(**kwargs):
    log_rhos = col([math.log(r) for r in RHOS])
    bootstrap = torch.tensor([BOOT], dtype=torch.float64)
    return vtrace_targets(log_rhos, col([G] * 3), col(R), col(V), bootstrap, **kwargs)


def test_vtrace_three_steps_by_hand():
    vs, pg = three_step()  # rho_bar = c_bar = pg_rho_bar = 1: clipped rhos = cs = [0.5, 1.0, 0.8]
    # deltas: 0.5 * (1 + 0.9*2 - 1) = 0.9; 1.0 * (0 + 0.9*3 - 2) = 0.7; 0.8 * (2 + 0.9*4 - 3) = 2.08
    # vs - V backwards: 2.08; 0.7 + 0.9*1.0*2.08 = 2.572; 0.9 + 0.9*0.5*2.572 = 2.0574
    assert torch.allclose(vs, col([1.0 + 2.0574, 2.0 + 2.572, 3.0 + 2.08]), atol=1e-12)
    # pg: 0.5 * (1 + 0.9*4.572 - 1) = 2.0574; 1.0 * (0 + 0.9*5.08 - 2) = 2.572; 0.8 * (2 + 0.9*4 - 3) = 2.08
    assert torch.allclose(pg, col([2.0574, 2.572, 2.08]), atol=1e-12)


def test_vtrace_three_steps_without_clipping():
    # pg_rho_bar=None: vs unchanged, the rho 2.0 at t=1 is no longer cut: 2.0 * (0.9*5.08 - 2) = 5.144
    vs, pg = three_step(pg_rho_bar=None)
    assert torch.allclose(vs, col([3.0574, 4.572, 5.08]), atol=1e-12)
    assert torch.allclose(pg, col([2.0574, 5.144, 2.08]), atol=1e-12)
    # rho_bar=None: delta_1 = 2.0 * 0.7 = 1.4, but the trace c_1 stays min(1, 2.0) = 1:
    # vs - V: 2.08; 1.4 + 0.9*1.0*2.08 = 3.272; 0.9 + 0.9*0.5*3.272 = 2.3724
    vs, pg = three_step(rho_bar=None)
    assert torch.allclose(vs, col([3.3724, 5.272, 5.08]), atol=1e-12)
    # pg_rho_bar still 1: 0.5 * (1 + 0.9*5.272 - 1) = 2.3724; 1.0 * (0.9*5.08 - 2) = 2.572; 2.08
    assert torch.allclose(pg, col([2.3724, 2.572, 2.08]), atol=1e-12)


def test_vtrace_targets_are_detached():
    values = col(V).requires_grad_(True)
    log_rhos = col([math.log(r) for r in RHOS]).requires_grad_(True)
    vs, pg = vtrace_targets(log_rhos, col([G] * 3), col(R), values, torch.tensor([BOOT], dtype=torch.float64))
    assert not vs.requires_grad and not pg.requires_grad


def test_vtrace_done_cuts_the_trace():
    # The transition out of t=1 ends the episode: discount 0 there.
    discounts = col([0.9, 0.0, 0.9])
    log_rhos = col([math.log(0.5), math.log(3.0), math.log(0.7)])

    def run(r2, v2, boot):
        return vtrace_targets(
            log_rhos, discounts, col([1.0, 2.0, r2]), col([0.5, 1.5, v2]), torch.tensor([boot], dtype=torch.float64)
        )

    vs_a, pg_a = run(5.0, 1.0, 10.0)
    vs_b, pg_b = run(-7.0, 4.0, -3.0)
    # Nothing after the done reaches steps 0 and 1 ...
    assert torch.equal(vs_a[:2], vs_b[:2]) and torch.equal(pg_a[:2], pg_b[:2])
    assert not torch.allclose(vs_a[2], vs_b[2])  # ... while step 2 itself did change.
    # By hand: vs_1 = 1.5 + min(1, 3) * (2 - 1.5) = 2.0; vs_0 = 0.5 + 0.5 * (1 + 0.9*1.5 - 0.5)
    # + 0.9 * 0.5 * (vs_1 - V_1) = 0.5 + 0.925 + 0.225 = 1.65
    assert torch.allclose(vs_a[:2], col([1.65, 2.0]), atol=1e-12)
    # pg_1 = 1 * (2 + 0 - 1.5) = 0.5; pg_0 = 0.5 * (1 + 0.9*2.0 - 0.5) = 1.15
    assert torch.allclose(pg_a[:2], col([1.15, 0.5]), atol=1e-12)


def test_vtrace_on_policy_is_the_n_step_return():
    T, B = 5, 3
    gen = torch.Generator().manual_seed(1234)
    rewards = torch.randn(T, B, generator=gen, dtype=torch.float64)
    values = torch.randn(T, B, generator=gen, dtype=torch.float64)
    bootstrap = torch.randn(B, generator=gen, dtype=torch.float64)
    alive = (torch.rand(T, B, generator=gen) > 0.25).to(torch.float64)
    discounts = 0.9 * alive
    assert (discounts == 0).any() and (discounts > 0).any()  # both cases occur with this seed
    vs, pg = vtrace_targets(torch.zeros(T, B, dtype=torch.float64), discounts, rewards, values, bootstrap)
    for b in range(B):
        for t in range(T):
            ret, scale = 0.0, 1.0
            for k in range(t, T):
                ret += scale * rewards[k, b].item()
                scale *= discounts[k, b].item()
            ret += scale * bootstrap[b].item()
            assert vs[t, b].item() == pytest.approx(ret, abs=1e-12)
            nxt = vs[t + 1, b].item() if t + 1 < T else bootstrap[b].item()
            expected_pg = rewards[t, b].item() + discounts[t, b].item() * nxt - values[t, b].item()
            assert pg[t, b].item() == pytest.approx(expected_pg, abs=1e-12)


def test_vtrace_lambda_zero_is_one_step_td():
    T, B = 4, 2
    gen = torch.Generator().manual_seed(7)
    log_rhos = torch.empty(T, B, dtype=torch.float64).uniform_(-1.5, 1.5, generator=gen)
    rewards = torch.randn(T, B, generator=gen, dtype=torch.float64)
    values = torch.randn(T, B, generator=gen, dtype=torch.float64)
    bootstrap = torch.randn(B, generator=gen, dtype=torch.float64)
    discounts = torch.full((T, B), 0.95, dtype=torch.float64)
    vs, pg = vtrace_targets(log_rhos, discounts, rewards, values, bootstrap, lambda_=0.0)
    for b in range(B):
        for t in range(T):
            rho = math.exp(log_rhos[t, b].item())
            v_next = values[t + 1, b].item() if t + 1 < T else bootstrap[b].item()
            td = rewards[t, b].item() + 0.95 * v_next - values[t, b].item()
            assert vs[t, b].item() == pytest.approx(values[t, b].item() + min(1.0, rho) * td, abs=1e-12)
            vs_next = vs[t + 1, b].item() if t + 1 < T else bootstrap[b].item()
            pg_expected = min(1.0, rho) * (rewards[t, b].item() + 0.95 * vs_next - values[t, b].item())
            assert pg[t, b].item() == pytest.approx(pg_expected, abs=1e-12)


def test_action_log_probs_and_entropy_by_hand():
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]], dtype=torch.float64)  # p = [1/4, 3/4], [1/2, 1/2]
    assert torch.allclose(
        action_log_probs(logits, torch.tensor([1, 0])),
        torch.tensor([math.log(0.75), math.log(0.5)], dtype=torch.float64),
        atol=1e-12,
    )
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert torch.allclose(categorical_entropy(logits), torch.tensor([h, math.log(2.0)], dtype=torch.float64))
    masked = torch.tensor([0.0, 0.0, float("-inf")])  # a zero-probability action adds nothing
    assert categorical_entropy(masked).item() == pytest.approx(math.log(2.0))


# loss_terms on a tiny unroll: T + 1 = 3 steps, B = 1, A = 3, uniform logits (on-policy).
LOSS_ARGS = {
    "discount": 0.9,
    "rho_bar": 1.0,
    "pg_rho_bar": 1.0,
    "lambda_": 1.0,
    "baseline_cost": 0.5,
    "entropy_cost": 0.01,
}


def tiny_unroll(rewards=(100.0, 1.0, 2.0), dones=(True, False, False)):
    return {
        "learner_logits": torch.zeros(3, 1, 3, dtype=torch.float64, requires_grad=True),
        "learner_values": col([0.5, 0.25, 4.0]).requires_grad_(True),
        "behaviour_logits": torch.zeros(3, 1, 3, dtype=torch.float64),
        "actions": torch.tensor([[2], [0], [1]]),
        "rewards": col(list(rewards)),
        "dones": torch.tensor(dones).unsqueeze(1),
    }


def test_loss_terms_shift_rewards_and_dones_and_bootstrap_from_last_value():
    out = loss_terms(**tiny_unroll(), **LOSS_ARGS)
    # rewards[0] = 100 and dones[0] are ignored; bootstrap = values[-1] = 4.
    # vs_1 = 2 + 0.9*4 = 5.6; vs_0 = 1 + 0.9*5.6 = 6.04
    assert torch.allclose(out["vs"], col([6.04, 5.6]), atol=1e-12)
    # on-policy pg = r + 0.9 vs_next - V: 1 + 0.9*5.6 - 0.5 = 5.54; 2 + 0.9*4 - 0.25 = 5.35
    assert torch.allclose(out["pg_advantages"], col([5.54, 5.35]), atol=1e-12)
    same = loss_terms(**tiny_unroll(rewards=(-50.0, 1.0, 2.0), dones=(False, False, False)), **LOSS_ARGS)
    assert torch.equal(same["vs"], out["vs"])
    # A done at the last step (obs_2 starts a new episode) cuts the bootstrap: vs_1 = 2, vs_0 = 1 + 0.9*2
    cut = loss_terms(**tiny_unroll(dones=(False, False, True)), **LOSS_ARGS)
    assert torch.allclose(cut["vs"], col([2.8, 2.0]), atol=1e-12)


def test_loss_terms_values_by_hand():
    out = loss_terms(**tiny_unroll(), **LOSS_ARGS)
    # uniform over 3 actions: log pi(a) = -log 3, entropy = log 3
    assert out["entropy"].item() == pytest.approx(math.log(3.0), abs=1e-12)
    assert out["entropy_loss"].item() == pytest.approx(-0.01 * math.log(3.0), abs=1e-12)
    policy = math.log(3.0) * (5.54 + 5.35) / 2  # -mean(-log 3 * pg)
    assert out["policy_loss"].item() == pytest.approx(policy, abs=1e-12)
    baseline = 0.5 * 0.5 * ((6.04 - 0.5) ** 2 + (5.6 - 0.25) ** 2) / 2
    assert out["baseline_loss"].item() == pytest.approx(baseline, abs=1e-12)
    assert out["total"].item() == pytest.approx(policy + baseline - 0.01 * math.log(3.0), abs=1e-12)


def test_loss_terms_gradients_and_detached_targets():
    args = tiny_unroll()
    args["learner_logits"] = torch.tensor(
        [[[0.0, 1.0, -1.0]], [[0.5, 0.0, 0.0]], [[3.0, 0.0, 0.0]]], dtype=torch.float64, requires_grad=True
    )
    out = loss_terms(**args, **LOSS_ARGS)
    assert not out["vs"].requires_grad and not out["pg_advantages"].requires_grad
    out["total"].backward()
    logits_grad, values_grad = args["learner_logits"].grad, args["learner_values"].grad
    assert logits_grad[:2].abs().sum() > 0 and values_grad[:2].abs().min() > 0
    # The last step only bootstraps, and the bootstrap value is a (detached) target.
    assert torch.all(logits_grad[2] == 0) and values_grad[2].item() == 0.0
    # Entropy is averaged over the trained steps only: learner_logits[-1] is not uniform yet it
    # does not count; with uniform logits[:-1] it would be exactly log 3.
    args2 = tiny_unroll()
    args2["learner_logits"] = torch.zeros(3, 1, 3, dtype=torch.float64)
    args2["learner_logits"][2, 0] = torch.tensor([5.0, -5.0, 0.0])
    assert loss_terms(**args2, **LOSS_ARGS)["entropy"].item() == pytest.approx(math.log(3.0), abs=1e-12)


def test_loss_terms_importance_ratio_is_target_over_behaviour():
    # T = 1: vs_0 = V_0 + min(1, rho) * (r_1 + 0.9 * V_1 - V_0) with rho = pi(a_0) / mu(a_0).
    base = {
        "learner_values": col([1.0, 2.0]),
        "actions": torch.tensor([[1], [0]]),
        "rewards": col([0.0, 3.0]),
        "dones": torch.tensor([[False], [False]]),
    }
    half = torch.tensor([[[0.0, 0.0]], [[0.0, 0.0]]], dtype=torch.float64)  # p(a=1) = 1/2
    three_quarters = torch.tensor([[[0.0, math.log(3.0)]], [[0.0, 0.0]]], dtype=torch.float64)  # p(a=1) = 3/4
    # pi = 1/2, mu = 3/4: rho = 2/3 -> vs_0 = 1 + (2/3) * (3 + 1.8 - 1) = 1 + 3.8 * 2/3
    out = loss_terms(learner_logits=half, behaviour_logits=three_quarters, **base, **LOSS_ARGS)
    assert out["vs"].item() == pytest.approx(1.0 + 3.8 * 2.0 / 3.0, abs=1e-12)
    # pi = 3/4, mu = 1/2: rho = 3/2, clipped to 1 -> vs_0 = 1 + 3.8
    out = loss_terms(learner_logits=three_quarters, behaviour_logits=half, **base, **LOSS_ARGS)
    assert out["vs"].item() == pytest.approx(4.8, abs=1e-12)
