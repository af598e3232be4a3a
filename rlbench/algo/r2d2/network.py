"""R2D2's recurrent Q-network: Nature-CNN (or MLP) torso, LSTM core, dueling head.

The core input is [torso(obs), one-hot(previous action), reward]; at an episode start
(done) the recurrent state, the previous action and the reward input are zeroed, so
inference and the learner see identical inputs for identical stored data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlbench.algo.r2d2.config import NetworkConfig
from rlbench.algo.torsos import make_torso


class R2D2Net(nn.Module):
    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, cfg: NetworkConfig):
        super().__init__()
        self.torso = make_torso(obs_shape, cfg.torso, cfg.mlp_hidden)
        self.num_actions = num_actions
        self.hidden = cfg.lstm_hidden
        self.core = nn.LSTMCell(self.torso.out_dim + num_actions + 1, cfg.lstm_hidden)
        self.value = nn.Sequential(nn.Linear(cfg.lstm_hidden, cfg.head_hidden), nn.ReLU(), nn.Linear(cfg.head_hidden, 1))
        self.advantage = nn.Sequential(
            nn.Linear(cfg.lstm_hidden, cfg.head_hidden), nn.ReLU(), nn.Linear(cfg.head_hidden, num_actions)
        )

    def initial_state(self, batch: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
        z = torch.zeros(batch, self.hidden, device=device)
        return z, z.clone()

    def unflatten_state(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(h, c) from the flattened [B, 2H] state central inference stores with a sequence."""
        return flat[:, : self.hidden].contiguous(), flat[:, self.hidden :].contiguous()

    def forward(self, obs, prev_action, reward, done, state):
        """obs [T, B, ...], prev_action/reward/done [T, B], state (h, c) [B, H] -> q [T, B, A], state."""
        T, B = done.shape
        features = self.torso(obs.reshape(T * B, *obs.shape[2:])).reshape(T, B, -1)
        keep = (~done).to(features.dtype).unsqueeze(-1)  # [T, B, 1]
        core_in = torch.cat(
            [features, F.one_hot(prev_action, self.num_actions).to(features.dtype) * keep, reward.unsqueeze(-1) * keep],
            dim=-1,
        )
        h, c = state
        outputs = []
        for t in range(T):
            h, c = self.core(core_in[t], (h * keep[t], c * keep[t]))
            outputs.append(h)
        return self._dueling(torch.stack(outputs)), (h, c)

    def _dueling(self, core_out: torch.Tensor) -> torch.Tensor:
        adv = self.advantage(core_out)
        return self.value(core_out) + adv - adv.mean(dim=-1, keepdim=True)
