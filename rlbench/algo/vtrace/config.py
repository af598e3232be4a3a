"""V-trace's config: the schema behind `algo.*` when algo.name=vtrace, and its rules.

Torch-free (validation imports it before torch loads). Defaults: SEED RL's agents/vtrace
learner flags and dmlab/vtrace_main.py optimizer (the reference notes in
../shared/reference/paper.md name them); each deviation says so where it is set. docs/vtrace.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from rlbench.algo.common.checks import torso_checks
from rlbench.algo.common.data import LearnerData
from rlbench.config.rules import Rules, int_at_least, one_of
from rlbench.core.metrics import Metric

LEARNS = True
ON_POLICY = True  # every unroll is trained once, by the learner a few updates past the policy that acted
PRESETS = {"vector": "vtrace_vector"}  # vector observations (gym): the MLP torso (conf/algo/vtrace_vector.yaml)
# The metrics it logs beside the shared ones (rlbench/core/metrics.py; docs/metrics.md documents them).
METRICS = (
    Metric(
        "policy_lag",
        "updates",
        "tick, final",
        "mean learner updates between the weights that finished an unroll and its training (V-trace)",
    ),
    Metric("vtrace/policy_loss", "-", "tick, final", "policy-gradient loss of the last update (V-trace)"),
    Metric("vtrace/baseline_loss", "-", "tick, final", "baseline loss of the last update (V-trace)"),
    Metric("vtrace/entropy", "nats", "tick, final", "mean policy entropy in the last update (V-trace)"),
)

OPS = {
    "inference": ("h2d_transfer", "forward", "d2h_transfer", "unroll_assembly", "queue_put"),
    "learner": ("wait", "queue_get", "h2d_transfer", "stack_rebuild", "forward_backward", "optimizer_step", "publish"),
}


@dataclass
class NetworkConfig:
    torso: str = "nature_cnn"  # "nature_cnn" for pixels, "mlp" for vector observations
    mlp_hidden: int = 64  # width of the MLP torso's two layers
    # LSTM core over [torso, one-hot previous action, reward] (SEED's dmlab agent); 0 = none
    # (feed-forward: policy and baseline straight from the torso, no recurrent state).
    lstm_hidden: int = 256


@dataclass
class Schema:
    name: str = "vtrace"  # the algorithm package: rlbench/algo/vtrace/
    network: NetworkConfig = field(default_factory=NetworkConfig)
    unroll_length: int = 100  # agent steps per unroll; each carries one more step to bootstrap from (SEED)
    batch_size: int = 32  # unrolls per learner update (SEED's flag)
    # Unrolls the FIFO between inference and the learner holds before the actors wait; null =
    # batch_size. SEED's queue holds 1 unroll and its input pipeline one batch: "about a batch".
    queue_capacity: Optional[int] = None
    discount: float = 0.99  # SEED's `discounting`
    lambda_: float = 1.0  # V-trace lambda (1: the full trace)
    rho_bar: float = 1.0  # truncation of the importance weights in the value targets (clip_rho_threshold)
    pg_rho_bar: float = 1.0  # ... in the policy-gradient advantages (clip_pg_rho_threshold); c_bar is 1 as in SEED
    baseline_cost: float = 0.5
    # Rewards in the loss are clipped to [-max_abs_reward, max_abs_reward]; 0 = off. SEED's
    # agents/vtrace/learner.py flag `max_abs_reward` (its default 0 is off); the default here is
    # the value all four SEED DMLab V-trace scripts (gcp/train_dmlab_*.sh) set, 1.0, which is
    # also IMPALA's Atari reward clip to [-1, 1]. Only the loss sees the clip (SEED's learner
    # clips after running the network); the network's reward input stays the env's reward
    # (SEED's DMLab network clips that input to [-1, 1] itself: docs/vtrace.md).
    max_abs_reward: float = 1.0
    entropy_cost: float = 0.0033  # the reference notes' Atari value (SEED's flag default is 0.00025)
    optimizer: str = "adam"  # "adam" (SEED's dmlab/football) or "rmsprop" (the IMPALA paper)
    learning_rate: float = 0.00048  # SEED's dmlab and football value
    lr_decay: bool = True  # linear decay to 0 over the task's updates (SEED's dmlab PolynomialDecay)
    adam_beta1: float = 0.0  # SEED's dmlab Adam(beta_1=0)
    adam_eps: float = 3.125e-7  # SEED's dmlab adam_epsilon
    rmsprop_alpha: float = 0.99  # RMSProp decay (IMPALA)
    rmsprop_eps: float = 0.1  # RMSProp epsilon (IMPALA)
    grad_clip: float = 0.0  # global gradient-norm clip; 0 = off (SEED's V-trace learner does not clip)
    publish_every: int = 1  # learner updates between weight copies to central inference


def unrolls_per_actor(agent_steps: int, unroll_length: int) -> int:
    """Complete unrolls of unroll_length + 1 steps, consecutive ones sharing one step."""
    return max(0, (agent_steps - 1) // unroll_length)


def queue_capacity(a) -> int:
    return a.queue_capacity if a.queue_capacity is not None else a.batch_size


def rules(c) -> Rules:
    a = c.algo
    return {
        "algo.network.torso": one_of("nature_cnn", "mlp"),
        "algo.network.mlp_hidden": int_at_least(1),
        "algo.network.lstm_hidden": ((lambda v: v >= 0), "0 (no LSTM core) or an integer >= 1"),
        "algo.unroll_length": int_at_least(1),
        "algo.batch_size": int_at_least(1),
        "algo.queue_capacity": (
            (lambda v: v is None or v >= a.batch_size),
            f"null (= batch_size) or an integer >= algo.batch_size={a.batch_size}",
        ),
        "algo.discount": ((lambda v: 0.0 < v <= 1.0), "a number in (0, 1]"),
        "algo.lambda_": ((lambda v: 0.0 <= v <= 1.0), "a number in [0, 1]"),
        "algo.rho_bar": ((lambda v: v > 0), "a number > 0"),
        "algo.pg_rho_bar": ((lambda v: v > 0), "a number > 0"),
        "algo.baseline_cost": ((lambda v: v >= 0), "a number >= 0"),
        "algo.max_abs_reward": ((lambda v: v >= 0), "a number >= 0 (0 = no reward clipping)"),
        "algo.entropy_cost": ((lambda v: v >= 0), "a number >= 0"),
        "algo.optimizer": one_of("adam", "rmsprop"),
        "algo.learning_rate": ((lambda v: v > 0), "a number > 0"),
        "algo.adam_beta1": ((lambda v: 0.0 <= v < 1.0), "a number in [0, 1)"),
        "algo.adam_eps": ((lambda v: v > 0), "a number > 0"),
        "algo.rmsprop_alpha": ((lambda v: 0.0 <= v < 1.0), "a number in [0, 1)"),
        "algo.rmsprop_eps": ((lambda v: v > 0), "a number > 0"),
        "algo.grad_clip": ((lambda v: v >= 0), "a number >= 0 (0 = off)"),
        "algo.publish_every": int_at_least(1),
    }


def task_unrolls(c) -> int:
    steps_per_actor = c.workload.frames // (c.env.frameskip * c.actors)
    return c.actors * unrolls_per_actor(steps_per_actor, c.algo.unroll_length)


def checks(c) -> list[str]:
    """The torso fits the env; the task makes at least one batch of unrolls."""
    problems = torso_checks(c)
    if c.learner and c.workload.learner_updates != 0 and task_unrolls(c) < c.algo.batch_size:
        need = (c.algo.unroll_length + 1) * c.env.frameskip * c.actors
        problems.append(
            f"workload.frames={c.workload.frames}: {c.actors} actors make {task_unrolls(c)} unrolls of "
            f"{c.algo.unroll_length + 1} steps, fewer than one batch (algo.batch_size={c.algo.batch_size}); "
            f"allowed: enough frames for a batch (>= {need * -(-c.algo.batch_size // c.actors)})"
        )
    return problems


def host_checks(c) -> list[str]:
    return []  # the FIFO holds about a batch: nothing to size against this host's memory


def task_learner_updates(c) -> int:
    """Every unroll is trained once (on-policy, no replay): the task's unrolls / batch_size."""
    return max(1, task_unrolls(c) // c.algo.batch_size)


def task_replay_ratio(c) -> float:
    """Samples per unroll the task implies (1 when the unrolls fill whole batches)."""
    return c.workload.learner_updates * c.algo.batch_size / max(task_unrolls(c), 1)


def learner_data(c) -> LearnerData:
    """batch_size unrolls of unroll_length + 1 steps (consecutive ones sharing one) per update."""
    a = c.algo
    return LearnerData(a.batch_size, a.unroll_length + 1, a.unroll_length, float(a.batch_size * a.unroll_length))


def profile_overrides(c) -> dict:
    return {}  # the FIFO fills to a batch from inference alone
