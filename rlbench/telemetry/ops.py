"""Time per operation (RL-Scope style), corrected for the cost of the annotations.

`calibrate_annotation` times empty annotations; `corrected_fractions` and `op_metrics` take
their cost out of each role's op totals and wall time (`op_frac/<role>/<op>`, and `other`).
The correction's equations: docs/metrics.md, "How the instrumentation correction works".
"""

from __future__ import annotations

import time

from rlbench.telemetry.timing import OpTimer


def calibrate_annotation(n: int = 20000) -> tuple[float, float]:
    """(inner_s, full_s): the measured-interval share and the full cost of one annotation."""
    timer = OpTimer("calibration")
    t0 = time.perf_counter()
    for _ in range(n):
        with timer.op("empty"):
            pass
    full = (time.perf_counter() - t0) / n
    inner = timer.totals["empty"] / n
    return inner, full


def corrected_fractions(
    totals: dict[str, float], counts: dict[str, int], wall_s: float, inner_s: float, full_s: float
) -> dict[str, float]:
    """Op fractions of one role's wall time, annotation cost removed (docs/metrics.md)."""
    wall = wall_s - sum(counts.values()) * full_s
    if wall <= 0:
        return {}
    out = {op: max(t - counts.get(op, 0) * inner_s, 0.0) / wall for op, t in totals.items()}
    out["other"] = max(1.0 - sum(out.values()), 0.0)
    return out


def op_metrics(timers: list[OpTimer], walls: dict[str, float], inner_s: float, full_s: float) -> dict[str, float]:
    """`op_frac/<role>/<op>` for every timer; a timer whose role has no wall is skipped.

    `walls` maps a timer's role to the wall time its thread ran (the inference role runs on
    the actors' driver thread, so it is given the actors' wall time).
    """
    out: dict[str, float] = {}
    for timer in timers:
        wall = walls.get(timer.role)
        if not wall:
            continue
        fracs = corrected_fractions(dict(timer.totals), dict(timer.counts), wall, inner_s, full_s)
        out.update({f"op_frac/{timer.role}/{op}": v for op, v in fracs.items()})
    return out
