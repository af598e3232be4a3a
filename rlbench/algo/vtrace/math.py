"""V-trace's pure math on tensors (IMPALA, Espeholt et al. 2018), as SEED RL computes it.

`vtrace_targets` is SEED's common/vtrace.py `from_importance_weights`, `loss_terms` its
agents/vtrace/learner.py `compute_loss` at its defaults (no KL term, a constant entropy cost).
Time-major arrays [T, B, ...]; conventions and equations: docs/vtrace.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def vtrace_targets(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    rho_bar: float | None = 1.0,
    pg_rho_bar: float | None = 1.0,
    lambda_: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace targets (vs, pg_advantages), both [T, B] and without gradient.

    log_rhos, discounts, rewards, values: [T, B]; bootstrap_value: [B]. A threshold of
    None means no clipping (the traces c_t stay clipped at 1 regardless).
    """
    if not (log_rhos.shape == discounts.shape == rewards.shape == values.shape):
        raise ValueError(f"shapes differ: {log_rhos.shape} {discounts.shape} {rewards.shape} {values.shape}")
    if bootstrap_value.shape != values.shape[1:]:
        raise ValueError(f"bootstrap_value {bootstrap_value.shape} does not match values {values.shape}")
    with torch.no_grad():
        rhos = torch.exp(log_rhos)
        clipped_rhos = rhos if rho_bar is None else torch.clamp(rhos, max=rho_bar)
        cs = lambda_ * torch.clamp(rhos, max=1.0)
        values_next = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * values_next - values)
        vs_minus_v = torch.empty_like(values)
        acc = torch.zeros_like(bootstrap_value)
        for t in range(values.shape[0] - 1, -1, -1):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            vs_minus_v[t] = acc
        vs = values + vs_minus_v
        vs_next = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
        pg_rhos = rhos if pg_rho_bar is None else torch.clamp(rhos, max=pg_rho_bar)
        pg_advantages = pg_rhos * (rewards + discounts * vs_next - values)
    return vs, pg_advantages


def action_log_probs(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[action]: logits [..., A], integer actions [...] -> [...]."""
    log_probs = F.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy -sum_a p_a log p_a of softmax(logits): [..., A] -> [...] (0 log 0 counts as 0)."""
    log_probs = F.log_softmax(logits, dim=-1)
    finite = torch.clamp(log_probs, min=torch.finfo(log_probs.dtype).min)
    return -(log_probs.exp() * finite).sum(dim=-1)


def loss_terms(
    learner_logits: torch.Tensor,
    learner_values: torch.Tensor,
    behaviour_logits: torch.Tensor,
    actions: torch.Tensor,
    rewards: torch.Tensor,
    dones: torch.Tensor,
    discount: float,
    rho_bar: float | None,
    pg_rho_bar: float | None,
    lambda_: float,
    baseline_cost: float,
    entropy_cost: float,
) -> dict[str, torch.Tensor]:
    """SEED RL's V-trace loss on an unroll of T + 1 steps (docs/vtrace.md, "conventions").

    learner_logits, behaviour_logits: [T + 1, B, A]; learner_values, actions, rewards,
    dones (bool): [T + 1, B]. Returns scalars total (with gradient to learner_logits and
    learner_values), policy_loss, baseline_loss, entropy_loss, entropy, and the detached
    targets vs and pg_advantages [T, B].
    """
    bootstrap = learner_values[-1]
    logits, values, taken = learner_logits[:-1], learner_values[:-1], actions[:-1]
    target_logp = action_log_probs(logits, taken)
    behaviour_logp = action_log_probs(behaviour_logits[:-1], taken)
    discounts = (~dones[1:].bool()).to(values.dtype) * discount
    vs, pg_advantages = vtrace_targets(
        target_logp - behaviour_logp,
        discounts,
        rewards[1:].to(values.dtype),
        values,
        bootstrap,
        rho_bar=rho_bar,
        pg_rho_bar=pg_rho_bar,
        lambda_=lambda_,
    )
    policy_loss = -(target_logp * pg_advantages).mean()
    baseline_loss = baseline_cost * 0.5 * (vs - values).pow(2).mean()
    entropy = categorical_entropy(logits).mean()
    entropy_loss = -entropy_cost * entropy
    return {
        "total": policy_loss + baseline_loss + entropy_loss,
        "policy_loss": policy_loss,
        "baseline_loss": baseline_loss,
        "entropy_loss": entropy_loss,
        "entropy": entropy,
        "vs": vs,
        "pg_advantages": pg_advantages,
    }
