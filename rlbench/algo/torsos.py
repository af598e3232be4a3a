"""Observation torsos shared by the algorithms' networks: Nature-CNN for Atari pixels, an MLP
for vector observations. `make_torso(obs_shape, torso, mlp_hidden)` picks one."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class NatureCNN(nn.Module):
    """Mnih et al. 2015 torso: uint8 [N, C, 84, 84] -> [N, 512]."""

    def __init__(self, in_channels: int, img_size: int):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, in_channels, img_size, img_size)).shape[1]
        self.fc = nn.Linear(flat, 512)
        self.out_dim = 512

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return F.relu(self.fc(self.convs(obs.float() / 255.0)))


class MLPTorso(nn.Module):
    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.out_dim = hidden

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())


def make_torso(obs_shape: tuple[int, ...], torso: str, mlp_hidden: int) -> nn.Module:
    if torso == "nature_cnn":
        return NatureCNN(obs_shape[0], obs_shape[-1])
    return MLPTorso(int(torch.tensor(obs_shape).prod()), mlp_hidden)
