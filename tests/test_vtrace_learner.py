"""V-trace's learner glue (rlbench/algo/vtrace/learner.py) against SEED's agents/vtrace/learner.py
and dmlab/vtrace_main.py: reward clipping in the loss only (`max_abs_reward`), Keras' Adam, the
linear learning-rate decay, and the defaults docs/vtrace.md states."""

from __future__ import annotations

import dataclasses
import threading

import pytest
import torch

from rlbench.algo.common.keras_adam import KerasAdam
from rlbench.algo.vtrace.config import Schema
from rlbench.algo.vtrace.learner import VTraceLearner, compute_loss, make_optimizer
from rlbench.algo.vtrace.network import VTraceNet


class RecordingNet:
    """Fixed outputs (uniform logits over 3 actions, given values); records the inputs it was run on."""

    def __init__(self, values):
        self.values, self.seen = torch.tensor(values, dtype=torch.float64).unsqueeze(1), {}

    def unflatten_state(self, flat):
        return ()

    def unroll(self, obs, prev_action, reward, done, state):
        self.seen = {"reward": reward.clone()}
        return torch.zeros(*self.values.shape, 3, dtype=torch.float64), self.values, state


def batch(rewards):
    """One unroll of T + 1 = 3 steps (B = 1), acted with the learner's own (uniform) policy."""
    return {
        "state": torch.zeros(1, 0),
        "obs": torch.zeros(3, 1, 4),
        "prev_action": torch.zeros(3, 1, dtype=torch.long),
        "reward": torch.tensor(rewards, dtype=torch.float64).unsqueeze(1),
        "done": torch.zeros(3, 1, dtype=torch.bool),
        "action": torch.tensor([[2], [0], [1]]),
        "agent_out": torch.zeros(3, 1, 3, dtype=torch.float64),
    }


def config(max_abs_reward):
    return dataclasses.replace(Schema(), discount=0.9, entropy_cost=0.01, max_abs_reward=max_abs_reward)


RAW = [100.0, 5.0, -3.0]  # rewards[0] belongs to the step before the unroll: the loss never uses it


@pytest.mark.parametrize("max_abs_reward, loss_rewards", [(1.0, [1.0, -1.0]), (2.0, [2.0, -2.0]), (0.0, [5.0, -3.0])])
def test_the_loss_sees_clipped_rewards_and_the_network_the_raw_ones(max_abs_reward, loss_rewards):
    net, b = RecordingNet([0.5, 0.25, 4.0]), batch(RAW)
    out = compute_loss(net, b, config(max_abs_reward))
    # On-policy (rho = 1), no dones, bootstrap V_2 = 4: vs_1 = r_1 + 0.9 * 4, vs_0 = r_0 + 0.9 vs_1,
    # pg_t = r_t + 0.9 vs_{t+1} - V_t, with r = the loss's rewards (steps 1 and 2 of the unroll).
    r0, r1 = loss_rewards
    vs1 = r1 + 0.9 * 4.0
    vs0 = r0 + 0.9 * vs1
    assert out["vs"].squeeze(1).tolist() == pytest.approx([vs0, vs1], abs=1e-12)
    assert out["pg_advantages"].squeeze(1).tolist() == pytest.approx([vs0 - 0.5, r1 + 3.6 - 0.25], abs=1e-12)
    # max_abs_reward 1: vs = [1 + 0.9 * 2.6, -1 + 3.6] = [3.34, 2.6]; unclipped it would be [5.54, 0.6]
    if max_abs_reward == 1.0:
        assert out["vs"].squeeze(1).tolist() == pytest.approx([3.34, 2.6], abs=1e-12)
    # The network ran on the env's rewards, and the batch was not changed in place.
    assert net.seen["reward"].squeeze(1).tolist() == RAW and b["reward"].squeeze(1).tolist() == RAW


def test_the_default_clips_at_one_and_the_cartpole_preset_does_not(compose_cfg):
    assert Schema().max_abs_reward == 1.0  # SEED's DMLab V-trace scripts; IMPALA's Atari clip
    assert compose_cfg(["algo=vtrace"]).algo.max_abs_reward == 1.0
    assert compose_cfg(["env=cartpole", "algo=vtrace_vector"]).algo.max_abs_reward == 0.0


def test_adam_is_keras_adam_and_rmsprop_is_torch_rmsprop():
    params = [torch.nn.Parameter(torch.zeros(2))]
    adam = make_optimizer(params, Schema())
    assert isinstance(adam, KerasAdam)
    assert adam.defaults["betas"] == (0.0, 0.999) and adam.defaults["eps"] == 3.125e-7
    assert type(make_optimizer(params, dataclasses.replace(Schema(), optimizer="rmsprop"))) is torch.optim.RMSprop


def test_update_k_uses_the_learning_rate_decayed_linearly_to_zero():
    """SEED's PolynomialDecay(lr, final_iteration, 0) at the iteration count before each update."""
    a = Schema()
    net = VTraceNet((4,), 2, dataclasses.replace(a.network, torso="mlp", mlp_hidden=4, lstm_hidden=0))
    learner = VTraceLearner(net, a, None, None, "cpu", 4, threading.Event())
    used = []
    for _ in range(4):
        used.append(learner.optimizer.param_groups[0]["lr"])
        learner.optimizer.step()
        learner.schedule.step()
    assert used == pytest.approx([a.learning_rate * f for f in (1.0, 0.75, 0.5, 0.25)], rel=1e-12)


def test_defaults_are_seeds_flags_and_the_documented_choices():
    """docs/vtrace.md: SEED's learner flags and DMLab main, the reference notes' entropy cost
    and the DMLab scripts' reward clip."""
    a = Schema()
    assert (a.unroll_length, a.batch_size, a.discount, a.lambda_, a.baseline_cost) == (100, 32, 0.99, 1.0, 0.5)
    assert (a.rho_bar, a.pg_rho_bar, a.grad_clip) == (1.0, 1.0, 0.0)
    assert (a.optimizer, a.learning_rate, a.adam_beta1, a.adam_eps, a.lr_decay) == (
        "adam",
        0.00048,
        0.0,
        3.125e-7,
        True,
    )
    assert (a.entropy_cost, a.max_abs_reward) == (0.0033, 1.0)
