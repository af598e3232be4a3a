"""V-trace's actor-critic network: Nature-CNN (or MLP) torso, an optional LSTM core, and
linear policy-logit and baseline heads (SEED RL's agents/vtrace networks).

With an LSTM the core input is [torso(obs), one-hot(previous action), reward] and a done
zeroes the state, the previous action and the reward (as R2D2Net, so inference and the
learner see identical inputs for identical stored data). Without one (lstm_hidden=0) the
heads read the torso and the recurrent state is empty.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlbench.algo.torsos import make_torso
from rlbench.algo.vtrace.config import NetworkConfig


class VTraceNet(nn.Module):
    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, cfg: NetworkConfig):
        super().__init__()
        self.torso = make_torso(obs_shape, cfg.torso, cfg.mlp_hidden)
        self.num_actions, self.hidden = num_actions, cfg.lstm_hidden
        width = self.torso.out_dim
        if self.hidden:
            self.core = nn.LSTMCell(width + num_actions + 1, self.hidden)
            width = self.hidden
        self.policy_logits = nn.Linear(width, num_actions)
        self.baseline = nn.Linear(width, 1)

    def initial_state(self, batch: int, device=None) -> tuple:
        if not self.hidden:
            return ()
        z = torch.zeros(batch, self.hidden, device=device)
        return z, z.clone()

    def unflatten_state(self, flat: torch.Tensor) -> tuple:
        """The state tuple from the flattened [B, S] state stored with an unroll."""
        if not self.hidden:
            return ()
        return flat[:, : self.hidden].contiguous(), flat[:, self.hidden :].contiguous()

    def forward(self, obs, prev_action, reward, done, state):
        """For acting: [T, B, ...] inputs -> policy logits [T, B, A], state."""
        logits, _, state = self.unroll(obs, prev_action, reward, done, state)
        return logits, state

    def unroll(self, obs, prev_action, reward, done, state):
        """-> policy logits [T, B, A], baseline values [T, B], state."""
        T, B = done.shape
        features = self.torso(obs.reshape(T * B, *obs.shape[2:])).reshape(T, B, -1)
        if self.hidden:
            features, state = self._core(features, prev_action, reward, done, state)
        return self.policy_logits(features), self.baseline(features).squeeze(-1), state

    def _core(self, features, prev_action, reward, done, state):
        keep = (~done).to(features.dtype).unsqueeze(-1)  # [T, B, 1]
        core_in = torch.cat(
            [features, F.one_hot(prev_action, self.num_actions).to(features.dtype) * keep, reward.unsqueeze(-1) * keep],
            dim=-1,
        )
        h, c = state
        outputs = []
        for t in range(done.shape[0]):
            h, c = self.core(core_in[t], (h * keep[t], c * keep[t]))
            outputs.append(h)
        return torch.stack(outputs), (h, c)
