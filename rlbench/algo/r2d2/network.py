"""R2D2's recurrent Q-network: Nature-CNN (or MLP) torso, LSTM core, dueling head.

The core input is [torso(obs), one-hot(previous action), reward]; at an episode start (done)
the recurrent state is zeroed (SEED RL's DuelingLSTMDQNNet, atari/networks.py), so inference
and the learner see identical inputs for identical stored data. docs/r2d2.md, "network".
"""

from __future__ import annotations

import torch
from torch import nn

from rlbench.algo.common import torsos
from rlbench.algo.r2d2.config import NetworkConfig
from rlbench.core.precision import at_least_fp32


class R2D2Net(nn.Module):
    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, cfg: NetworkConfig):
        super().__init__()
        self.torso = torsos.make_torso(obs_shape, cfg.torso, cfg.mlp_hidden)
        self.num_actions = num_actions
        self.hidden = cfg.lstm_hidden
        self.core = nn.LSTMCell(self.torso.out_dim + num_actions + 1, cfg.lstm_hidden)
        self.value = nn.Sequential(
            nn.Linear(cfg.lstm_hidden, cfg.head_hidden), nn.ReLU(), nn.Linear(cfg.head_hidden, 1)
        )
        self.advantage = nn.Sequential(  # no bias on the last layer, as SEED's (atari/networks.py)
            nn.Linear(cfg.lstm_hidden, cfg.head_hidden), nn.ReLU(), nn.Linear(cfg.head_hidden, num_actions, bias=False)
        )

    def initial_state(self, batch: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        return torsos.zero_lstm_state(batch, self.hidden, device)

    def unflatten_state(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torsos.split_lstm_state(flat, self.hidden)

    def forward(self, obs, prev_action, reward, done, state):
        """obs [T, B, ...], prev_action/reward/done [T, B], state (h, c) [B, H] -> q [T, B, A], state."""
        core_out, state = torsos.lstm_core(
            self.core, self.num_actions, torsos.features(self.torso, obs), prev_action, reward, done, state
        )
        with torsos.full_precision(core_out):  # Q values in fp32: the targets and priorities are made of them
            return self._dueling(at_least_fp32(core_out)), state

    def _dueling(self, core_out: torch.Tensor) -> torch.Tensor:
        adv = self.advantage(core_out)
        return self.value(core_out) + adv - adv.mean(dim=-1, keepdim=True)
