"""What bounds one job, from its final metrics: a pure rule (no MLflow, no plotting).

The job names its bound with it (the `bound` tag, docs/metrics.md), and the verdict's Result
holds it per job and per configuration (rlbench/core/verdict.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

BOUND_KINDS = ("environment stepping", "inference", "learner", "waiting")


@dataclass
class Bound:
    kind: str  # one of BOUND_KINDS, or "unknown"
    share: float | None  # the deciding share of time
    evidence: dict[str, float] = field(default_factory=dict)
    text: str = ""


def bottleneck(m: dict[str, float], tail_limit: float = 0.5) -> Bound:
    """What bounds a job. Two phases: while the actors step, their driver thread splits its
    time between env stepping, the central inference call, being held back by the learner
    (inference blocked on a full unroll queue, or the replay ratio) and untimed time (waiting);
    after the frame target, the job
    only waits for the learner to reach its update target. If that learner tail is more than
    `tail_limit` of the runtime, the learner bounds the task; otherwise the largest actor share."""
    ops = {k.removeprefix("op_frac/actors/"): v for k, v in m.items() if k.startswith("op_frac/actors/")}
    if not ops:
        return Bound("unknown", None, {}, "no op_frac/actors/* metrics (telemetry off or job not finished)")
    runtime, frames, fps = m.get("runtime_s"), m.get("frames"), m.get("fps")
    evidence = {f"actors/{k}": v for k, v in sorted(ops.items())}
    if "op_frac/learner/wait" in m:
        evidence["learner busy"] = 1 - m["op_frac/learner/wait"]
    # the actors' end: actors_done_s (the contract's; it counts the envs' first reset, which
    # frames / fps, the stepping time, leaves out: docs/predict.md), else frames / fps
    done_s = m.get("actors_done_s") or (frames / fps if frames and fps else None)
    if runtime and done_s:
        tail = max(runtime - done_s, 0.0) / runtime
        evidence["learner tail of runtime"] = tail
        if tail > tail_limit and m.get("learner_updates"):  # no learner (algo=random): no learner tail
            return Bound(
                "learner",
                tail,
                evidence,
                f"learner: the actors were done after {done_s:.1f} s of {runtime:.1f} s; the rest "
                f"({tail:.0%}) waited for learner updates (learner busy "
                f"{evidence.get('learner busy', float('nan')):.0%} of its time)",
            )
    # inference blocked on a full unroll queue (SEED's coupling) is the learner holding the actors back
    blocked = ops.get("inference", 0.0) * m.get("op_frac/inference/queue_full_wait", 0.0)
    if blocked:
        evidence["actors/inference blocked on a full unroll queue"] = blocked
    shares = {
        "environment stepping": ops.get("env_step", 0.0),
        "inference": ops.get("inference", 0.0) - blocked,
        "learner": ops.get("rate_limited", 0.0) + blocked,
        "waiting": ops.get("other", 0.0),
    }
    kind = max(shares, key=shares.get)
    detail = ", ".join(f"{k} {v:.0%}" for k, v in evidence.items())
    why = {
        "environment stepping": "in the vector env's step",
        "inference": "in central inference",
        "learner": "held back until the learner caught up (a full unroll queue or the replay ratio)",
        "waiting": "outside any timed operation (queues, Python overhead)",
    }[kind]
    return Bound(
        kind, shares[kind], evidence, f"{kind}: actors spent {shares[kind]:.0%} of their time {why} ({detail})"
    )
