"""V-trace's actor-critic network: Nature-CNN (or MLP) torso, an optional LSTM core, and
linear policy-logit and baseline heads (SEED RL's agents/vtrace networks).

Core input [torso(obs), one-hot(previous action), reward]; a done zeroes only the state, as in
SEED; without an LSTM (lstm_hidden=0) the heads read the torso. docs/vtrace.md, "network".
"""

from __future__ import annotations

import torch
from torch import nn

from rlbench.algo.common import torsos
from rlbench.algo.vtrace.config import NetworkConfig
from rlbench.core.precision import at_least_fp32


class VTraceNet(nn.Module):
    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, cfg: NetworkConfig):
        super().__init__()
        self.torso = torsos.make_torso(obs_shape, cfg.torso, cfg.mlp_hidden)
        self.num_actions, self.hidden = num_actions, cfg.lstm_hidden
        width = self.torso.out_dim
        if self.hidden:
            self.core = nn.LSTMCell(width + num_actions + 1, self.hidden)
            width = self.hidden
        self.policy_logits = nn.Linear(width, num_actions)
        self.baseline = nn.Linear(width, 1)

    def initial_state(self, batch: int, device=None) -> tuple:
        return torsos.zero_lstm_state(batch, self.hidden, device) if self.hidden else ()

    def unflatten_state(self, flat: torch.Tensor) -> tuple:
        """The state tuple from the flattened [B, S] state stored with an unroll."""
        return torsos.split_lstm_state(flat, self.hidden) if self.hidden else ()

    def forward(self, obs, prev_action, reward, done, state):
        """For acting: [T, B, ...] inputs -> policy logits [T, B, A], state."""
        logits, _, state = self.unroll(obs, prev_action, reward, done, state)
        return logits, state

    def unroll(self, obs, prev_action, reward, done, state):
        """-> policy logits [T, B, A], baseline values [T, B], state."""
        out = torsos.features(self.torso, obs)
        if self.hidden:
            out, state = torsos.lstm_core(self.core, self.num_actions, out, prev_action, reward, done, state)
        with torsos.full_precision(out):  # logits and baseline in fp32: V-trace's weights and targets are made of them
            out = at_least_fp32(out)
            return self.policy_logits(out), self.baseline(out).squeeze(-1), state
