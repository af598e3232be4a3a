"""What acts in V-trace: the policy's sampling (rlbench/algo/vtrace/acting.py) and the
network's inputs at an episode start (rlbench/algo/vtrace/network.py); docs/vtrace.md rows
"acting" and "network"."""

from __future__ import annotations

import math

import numpy as np
import torch

from rlbench.algo.vtrace.acting import SoftmaxSample, sample_softmax
from rlbench.algo.vtrace.config import NetworkConfig
from rlbench.algo.vtrace.network import VTraceNet


def test_training_envs_sample_from_the_softmax():
    logits = np.tile([0.0, math.log(2.0), math.log(3.0)], (60_000, 1))  # p = 1/6, 2/6, 3/6
    freq = np.bincount(sample_softmax(logits, np.random.default_rng(0)), minlength=3) / len(logits)
    np.testing.assert_allclose(freq, [1 / 6, 2 / 6, 3 / 6], atol=0.01)  # ~5 standard errors


def test_evaluation_envs_act_greedily_and_training_envs_do_not():
    policy = SoftmaxSample(None, None, None, num_train=2, eval_epsilon=0.0, seed=0)
    logits = np.tile([0.0, 0.5, 0.2], (4, 1))  # ids 0, 1 train; 2, 3 evaluate
    acts = np.stack([policy.act(np.arange(4), logits) for _ in range(200)])
    assert (acts[:, 2:] == 1).all()  # argmax
    assert {0, 2} <= set(acts[:, :2].ravel().tolist())  # samples take the other actions too


def test_a_done_zeroes_the_state_and_keeps_the_previous_action_and_the_reward_input():
    torch.manual_seed(0)
    net = VTraceNet((4,), 3, NetworkConfig(torso="mlp", mlp_hidden=8, lstm_hidden=6))
    obs = torch.randn(1, 2, 4)
    state = (torch.randn(2, 6), torch.randn(2, 6))
    done = torch.tensor([[True, False]])

    def run(prev_action, reward, done, state):
        with torch.no_grad():
            return net.unroll(obs, torch.tensor([prev_action]), torch.tensor([reward]), done, state)[0]

    first = run([2, 2], [5.0, 5.0], done, state)
    fresh = run([2, 2], [5.0, 5.0], done, net.initial_state(2))
    assert torch.equal(first[0, 0], fresh[0, 0])  # env 0 starts an episode: no state carried in
    assert not torch.allclose(first[0, 1], fresh[0, 1])  # env 1 does not
    # as SEED's networks (only the core state is reset): the last action and reward stay inputs
    assert not torch.allclose(first[0, 0], run([0, 0], [0.0, 0.0], done, state)[0, 0])
    # The reward input is the env's reward, not clipped to [-1, 1] (SEED's DMLab network clips it).
    going = torch.tensor([[False, False]])
    assert not torch.allclose(run([2, 2], [5.0, 5.0], going, state), run([2, 2], [1.0, 1.0], going, state))
