"""Pure energy math against hand-computed values."""

from __future__ import annotations

import math

import pytest

from rlbench.telemetry.energy import (
    CounterAccumulator,
    counter_delta,
    cpu_energy_estimate,
    integrate_power,
    linear_cpu_power,
    max_valid,
    mean_valid,
    span_valid,
)


def test_constant_power_integrates_exactly() -> None:
    assert integrate_power([0.0, 0.5, 2.0, 3.0], [200.0] * 4) == 600.0


def test_linear_ramp_integral() -> None:
    # P(t) = 100 + 50 t over 0..10 s: 100*10 + 25*100 = 3500 J.
    times = [i / 100 for i in range(1001)]
    assert integrate_power(times, [100 + 50 * t for t in times]) == pytest.approx(3500.0, rel=1e-12)


def test_curved_trace_within_tolerance() -> None:
    # P(t) = 100 + 10 t^2 over 0..3 s: 300 + 90 = 390 J; trapezoid error ~ 1e-4 at 1000 steps.
    times = [3 * i / 1000 for i in range(1001)]
    assert integrate_power(times, [100 + 10 * t * t for t in times]) == pytest.approx(390.0, abs=1e-3)


def test_segments_touching_missing_samples_are_skipped() -> None:
    # Segments 0-1 and 1-2 touch the None; only 2-3 (100 W for 1 s) counts.
    assert integrate_power([0, 1, 2, 3], [100.0, None, 100.0, 100.0]) == 100.0
    assert integrate_power([0, 1, 2], [100.0, math.nan, 100.0]) is None


@pytest.mark.parametrize("watts", [[], [5.0], [5.0, None], [None, None, None]])
def test_fewer_than_two_valid_samples_is_none(watts: list) -> None:
    assert integrate_power(list(range(len(watts))), watts) is None


def test_integrate_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        integrate_power([0, 1], [1.0])
    with pytest.raises(ValueError):
        integrate_power([1, 0], [1.0, 1.0])


@pytest.mark.parametrize(
    ("prev", "cur", "max_range", "expected"),
    [
        (10, 25, 100, 15),
        (7, 7, 100, 0),
        (100 - 10, 5, 100, 15),  # wrap: +10 to the top, +5 after
        (2**32 - 10, 5, 2**32, 15),
        (90, 5, None, None),  # wrap with unknown range: dropped
        (10, 25, None, 15),  # no wrap needs no range
        (150, 5, 100, None),  # prev beyond the stated range: never negative
    ],
)
def test_counter_delta(prev: int, cur: int, max_range: int | None, expected: int | None) -> None:
    assert counter_delta(prev, cur, max_range) == expected


def test_counter_accumulator_sums_and_counts_drops() -> None:
    acc = CounterAccumulator()
    assert acc.update(90, 100) is None  # first reading: baseline
    assert acc.update(95, 100) == 5
    assert acc.update(3, 100) == 8  # wrap
    assert acc.update(1, None) is None  # wrap with unknown range: dropped, rebaselined
    assert acc.update(4, None) == 3
    assert (acc.total, acc.dropped) == (16, 1)


def test_linear_cpu_power_hand_values() -> None:
    assert linear_cpu_power(0.0, 100.0, 0.3) == pytest.approx(30.0)
    assert linear_cpu_power(0.5, 100.0, 0.3) == pytest.approx(65.0)
    assert linear_cpu_power(1.0, 100.0, 0.3) == pytest.approx(100.0)
    assert linear_cpu_power(1.7, 100.0, 0.3) == pytest.approx(100.0)  # clamped


def test_cpu_energy_estimate() -> None:
    times = [0.0, 5.0, 10.0]
    # 65 W for 10 s.
    assert cpu_energy_estimate([0.5, 0.5, 0.5], times, tdp_w=100.0, idle_frac=0.3) == pytest.approx(650.0)
    # 30 W -> 100 W ramp over 10 s: mean 65 W.
    assert cpu_energy_estimate([0.0, 0.5, 1.0], times, 100.0, 0.3) == pytest.approx(650.0)
    assert cpu_energy_estimate([None, 0.5, None], times, 100.0) is None
    with pytest.raises(ValueError):
        cpu_energy_estimate([0.5, 0.5], [0, 1], tdp_w=0.0)
    with pytest.raises(ValueError):
        cpu_energy_estimate([0.5, 0.5], [0, 1], tdp_w=10.0, idle_frac=1.5)


def test_reductions_ignore_missing() -> None:
    assert mean_valid([1.0, None, 3.0]) == 2.0
    assert mean_valid([None]) is None
    assert max_valid([1.0, None, 3.0]) == 3.0
    assert max_valid([]) is None
    assert span_valid([None, 2.0, None, 7.5, None]) == 5.5
    assert span_valid([None, 2.0]) is None
