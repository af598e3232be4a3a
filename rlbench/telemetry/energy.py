"""Pure energy arithmetic: power integration, wrapping counters, a stated CPU power model.

Nothing here touches hardware or clocks, so every function is checked against hand-computed
values in tests/telemetry/test_energy.py. What the energies mean: docs/metrics.md, "Telemetry".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import TypeGuard

DEFAULT_IDLE_FRAC = 0.3
"""Assumed share of TDP a package draws at 0 % utilisation (a stated guess, not a measurement)."""


def _valid(x: float | None) -> TypeGuard[float]:
    return x is not None and math.isfinite(x)


def integrate_power(times_s: Sequence[float], watts: Sequence[float | None]) -> float | None:
    """Trapezoid integral of power over time, in joules.

    A segment [t_i, t_i+1] counts only when both of its samples are valid (not None,
    finite); a segment touching a missing sample is skipped, so a gap contributes
    nothing (the result undercounts across gaps rather than inventing power).
    Returns None when no segment is valid (fewer than 2 adjacent valid samples).
    """
    if len(times_s) != len(watts):
        raise ValueError(f"{len(times_s)} times but {len(watts)} power samples")
    total, segments = 0.0, 0
    for (t0, p0), (t1, p1) in pairwise(zip(times_s, watts, strict=True)):
        if t1 < t0:
            raise ValueError(f"times must not decrease ({t0} then {t1})")
        if _valid(p0) and _valid(p1):
            total += 0.5 * (p0 + p1) * (t1 - t0)
            segments += 1
    return total if segments else None


def counter_delta(prev: int, cur: int, max_range: int | None) -> int | None:
    """Increase of a monotonic counter that wraps to 0 after `max_range`.

    cur >= prev: cur - prev.  cur < prev (a wrap): max_range - prev + cur.
    A wrap with unknown max_range, or one that would come out negative
    (prev beyond the stated range), gives None: the delta is dropped, never negative.
    """
    if cur >= prev:
        return cur - prev
    if max_range is None:
        return None
    delta = max_range - prev + cur
    return delta if delta >= 0 else None


class CounterAccumulator:
    """Running sum of a wrapping counter's deltas; dropped deltas are counted, not guessed."""

    def __init__(self) -> None:
        self.prev: int | None = None
        self.total: int = 0
        self.dropped: int = 0

    def update(self, raw: int, max_range: int | None) -> int | None:
        """Feed one raw reading; return its delta (None for the first reading or a dropped one)."""
        prev, self.prev = self.prev, raw
        if prev is None:
            return None
        delta = counter_delta(prev, raw, max_range)
        if delta is None:
            self.dropped += 1
        else:
            self.total += delta
        return delta


def linear_cpu_power(util_frac: float, tdp_w: float, idle_frac: float = DEFAULT_IDLE_FRAC) -> float:
    """Stated model P = tdp * (idle_frac + (1 - idle_frac) * util), util clamped to [0, 1]."""
    util = min(max(util_frac, 0.0), 1.0)
    return tdp_w * (idle_frac + (1.0 - idle_frac) * util)


def cpu_energy_estimate(
    util_frac_series: Sequence[float | None],
    times_s: Sequence[float],
    tdp_w: float,
    idle_frac: float = DEFAULT_IDLE_FRAC,
) -> float | None:
    """Estimated CPU package energy (J) from utilisation with `linear_cpu_power`.

    Only for when RAPL cannot be read; callers must label the result an estimate.
    Missing utilisation samples are skipped as in `integrate_power`.
    """
    if tdp_w <= 0:
        raise ValueError(f"tdp_w must be > 0, got {tdp_w}")
    if not 0.0 <= idle_frac <= 1.0:
        raise ValueError(f"idle_frac must be in [0, 1], got {idle_frac}")
    watts = [linear_cpu_power(u, tdp_w, idle_frac) if _valid(u) else None for u in util_frac_series]
    return integrate_power(times_s, watts)


def mean_valid(values: Iterable[float | None]) -> float | None:
    """Mean of the valid values; None when there are none."""
    kept = [v for v in values if _valid(v)]
    return sum(kept) / len(kept) if kept else None


def max_valid(values: Iterable[float | None]) -> float | None:
    """Maximum of the valid values; None when there are none."""
    kept = [v for v in values if _valid(v)]
    return max(kept) if kept else None


def span_valid(values: Sequence[float | None]) -> float | None:
    """last - first over the valid values of a cumulative series; None with fewer than 2."""
    kept = [v for v in values if _valid(v)]
    return kept[-1] - kept[0] if len(kept) >= 2 else None
