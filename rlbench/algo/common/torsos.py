"""The network pieces the algorithms share: observation torsos (Nature-CNN for Atari pixels,
an MLP for vector observations; `make_torso` picks one), `features` over [T, B] inputs, and
the LSTM core over [torso, one-hot previous action, reward] whose state zeroes at an episode start
(`lstm_core`, with its state as (h, c) and flattened for storage). docs/r2d2.md and
docs/vtrace.md, "network"; what runs at low precision: docs/precision.md."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rlbench.core.precision import at_least_fp32


class NatureCNN(nn.Module):
    """Mnih et al. 2015 torso: uint8 [N, C, 84, 84] -> [N, 512]; a float input is frames that
    `prepare` scaled already (R2D2's learner scales a sequence once for its four passes). The
    ReLUs and the scaling run in place (the same values, without a fresh tensor of the
    learner's [T*B, C, 84, 84] each); `channels_last` lays out the weights and inputs as oneDNN's
    convolutions prefer (inputs reordered while still uint8, a quarter of the bytes)."""

    def __init__(self, in_channels: int, img_size: int):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(inplace=True),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, in_channels, img_size, img_size)).shape[1]
        self.fc = nn.Linear(flat, 512)
        self.out_dim = 512
        self.memory_format = "contiguous"  # set_memory_format: rlbench/core/hot_path.py's layouts

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs if obs.is_floating_point() else self.prepare(obs)
        return F.relu(self.fc(self.convs(x)))

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        """uint8 frames [..., C, H, W] as the convolutions take them: a new float32 tensor scaled
        by 1/255, in the torso's layout, of obs's shape."""
        x = obs.reshape(-1, *obs.shape[-3:])
        if self.memory_format == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        return x.to(torch.float32, copy=True).div_(255.0).reshape(obs.shape)

    def set_memory_format(self, layout: str) -> None:
        """`layout` (rlbench/core/hot_path.py memory_format): contiguous or channels_last."""
        self.memory_format = layout
        self.convs.to(memory_format=torch.channels_last if layout == "channels_last" else torch.contiguous_format)


class MLPTorso(nn.Module):
    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.out_dim = hidden

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float())

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        """Vector observations as the layers take them: float32 (no scaling)."""
        return obs.float()


def make_torso(obs_shape: tuple[int, ...], torso: str, mlp_hidden: int) -> nn.Module:
    if torso == "nature_cnn":
        return NatureCNN(obs_shape[0], obs_shape[-1])
    return MLPTorso(int(torch.tensor(obs_shape).prod()), mlp_hidden)


def features(torso: nn.Module, obs: torch.Tensor) -> torch.Tensor:
    """obs [T, B, ...] -> torso features [T, B, F]."""
    T, B = obs.shape[:2]
    return torso(obs.reshape(T * B, *obs.shape[2:])).reshape(T, B, -1)


def full_precision(x: torch.Tensor):
    """Autocast off on x's device: the block runs in fp32 whatever the job's precision
    (rlbench/core/precision.py); its inputs must be made fp32 (`.float()`) inside it."""
    return torch.autocast(x.device.type, enabled=False)


def lstm_core(cell: nn.LSTMCell, num_actions: int, feats, prev_action, reward, done, state):
    """The core over [features, one-hot(previous action), reward], all [T, B, ...]; at an episode
    start (done) only the recurrent state is zeroed, as SEED RL's networks do (atari/networks.py
    `_unroll_cell`; the previous action and the reward, the last of the ended episode, stay as
    inputs), so inference and the learner see identical inputs for identical stored data.
    Under autocast (precision=bf16/fp16) see `_cell`: the state stays fp32.
    -> outputs [T, B, H], (h, c)."""
    feats = at_least_fp32(feats)
    keep = (~done).to(feats.dtype).unsqueeze(-1)  # [T, B, 1]
    core_in = torch.cat([feats, F.one_hot(prev_action, num_actions).to(feats.dtype), reward.unsqueeze(-1)], dim=-1)
    h, c = state
    outputs = []
    # unbind, not core_in[t]: each step's backward of an index would fill a zero [T, B, ...] gradient
    for x, k in zip(core_in.unbind(0), keep.unbind(0), strict=True):
        h, c = _cell(cell, x, h * k, c * k)
        outputs.append(h)
    return torch.stack(outputs), (h, c)


def _cell(cell: nn.LSTMCell, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
    """One LSTM step. In fp32 nn.LSTMCell itself. Under autocast its math written out (torch's
    gate order i, f, g, o): the two gate matmuls run at the autocast precision (where the
    core's FLOPs are), the gates' sum, the nonlinearities and the cell state in fp32, on every
    device (CUDA's autocast would run the fused cell, state included, in bf16/fp16; the state
    is carried through whole episodes by central inference and stored with every unroll)."""
    if not torch.is_autocast_enabled(x.device.type):
        return cell(x, (h, c))
    gates = at_least_fp32(F.linear(x, cell.weight_ih, cell.bias_ih)) + at_least_fp32(
        F.linear(h, cell.weight_hh, cell.bias_hh)
    )
    i, f, g, o = gates.chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def zero_lstm_state(batch: int, hidden: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.zeros(batch, hidden, device=device)
    return z, z.clone()


def split_lstm_state(flat: torch.Tensor, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(h, c) from the flattened [B, 2H] state central inference stores with an unroll."""
    return flat[:, :hidden].contiguous(), flat[:, hidden:].contiguous()
