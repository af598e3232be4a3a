"""R2D2's pure math on tensors: value rescaling, n-step double-Q targets, the loss, priorities.

The numpy half (sequences, epsilons, IS weights) is rlbench/algo/r2d2/sequences.py, free of
torch so that validating a config stays fast. Time-major arrays [T, B, ...], as in SEED RL;
conventions: docs/r2d2.md, "The code's conventions".
"""

from __future__ import annotations

import torch


def value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x  (Pohlen et al. 2018)."""
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1.0) - 1.0) + eps * x


def inverse_value_rescale(x: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)."""
    root = torch.sqrt(1.0 + 4.0 * eps * (torch.abs(x) + 1.0 + eps))
    return torch.sign(x) * (((root - 1.0) / (2.0 * eps)) ** 2 - 1.0)


def n_step_returns(
    rewards: torch.Tensor, dones: torch.Tensor, bootstrap: torch.Tensor, n: int, discount: float
) -> torch.Tensor:
    """n-step returns G_t for every t in [0, T - 1), truncated at the end as SEED RL does.

    rewards, dones, bootstrap: [T, B] (the trained steps plus one more to bootstrap from).
    bootstrap[t] is the (unrescaled) value of obs_t. With horizon m_t = min(n, T - 1 - t):
    G_t = sum_{k=1..m_t} discount^(k-1) r_{t+k} [no episode end in (t, t+k)]
          + discount^m_t V(obs_{t+m_t}) [no episode end in (t, t+m_t]].
    So the last n - 1 targets use 1..n-1-step returns bootstrapped from the last step
    (SEED RL's utils.n_step_bellman_target), and every one of the T - 1 steps has a target.
    Returns [T - 1, B].
    """
    T = rewards.shape[0]
    steps = T - 1
    if steps <= 0:
        raise ValueError(f"sequence of {T} steps is too short: need the trained steps plus 1 to bootstrap")
    t = torch.arange(steps, device=rewards.device)
    horizon = torch.clamp(T - 1 - t, max=n)  # m_t
    alive = torch.ones_like(rewards[:steps])
    ret = torch.zeros_like(rewards[:steps])
    for k in range(1, n + 1):
        valid = (k <= horizon).to(rewards.dtype).unsqueeze(-1)  # [steps, 1]
        idx = torch.clamp(t + k, max=T - 1)
        ret = ret + (discount ** (k - 1)) * alive * valid * rewards[idx]
        alive = alive * (1.0 - valid * dones[idx].to(rewards.dtype))
    last = t + horizon
    scale = (discount ** horizon.to(rewards.dtype)).unsqueeze(-1)
    return ret + scale * alive * bootstrap[last]


def n_step_double_q_targets(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    q_online: torch.Tensor,
    q_target: torch.Tensor,
    n: int,
    discount: float,
    eps: float = 1e-3,
) -> torch.Tensor:
    """Rescaled n-step double-Q targets, [T - 1, B] (truncated n-step at the end).

    q_online, q_target: [T, B, A] in rescaled space. The bootstrap action is the online
    argmax; its value is read from the target network and unrescaled before discounting.
    """
    best = q_online.argmax(dim=-1, keepdim=True)
    return n_step_targets(rewards, dones, q_target.gather(-1, best).squeeze(-1), n, discount, eps)


def n_step_targets(
    rewards: torch.Tensor, dones: torch.Tensor, q_bootstrap: torch.Tensor, n: int, discount: float, eps: float = 1e-3
) -> torch.Tensor:
    """Rescaled n-step targets [T - 1, B] from the rescaled values q_bootstrap [T, B] of the
    bootstrap actions (unrescaled before discounting, the return rescaled again)."""
    bootstrap = inverse_value_rescale(q_bootstrap, eps)
    return value_rescale(n_step_returns(rewards, dones, bootstrap, n, discount), eps)


def sequence_loss(td: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """SEED RL's R2D2 loss: per sequence 0.5 * SUM over time of td^2, then the mean over the
    batch of importance weight x that. td [T, B], weights [B] -> scalar."""
    return (weights * 0.5 * td.pow(2).sum(dim=0)).mean()


def mixed_priority(abs_td: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    """Sequence priority eta * max_t |td| + (1 - eta) * mean_t |td|; abs_td [T, B] -> [B]."""
    return eta * abs_td.max(dim=0).values + (1.0 - eta) * abs_td.mean(dim=0)
