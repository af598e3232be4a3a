"""The study's task sizing (rlbench/predict/sizing.py): the fewest frames that hold a minimum."""

import pytest

from rlbench.predict.sizing import least_frames


@pytest.mark.parametrize("need", [1, 9_999, 10_000, 10_001, 123_456, 2_000_000])
def test_the_fewest_frames_that_hold_is_the_first_step_at_or_above_the_need(need):
    asked = []

    def holds(frames):
        asked.append(frames)
        return frames >= need

    assert least_frames(holds) == max(10_000, -(-need // 10_000) * 10_000)
    assert len(asked) < 2 * 12 + 4  # doubling, then bisection: a few dozen predictions, not one per step


def test_the_floor_and_the_ceiling():
    assert least_frames(lambda f: True, floor=82_944) == 90_000  # the floor, rounded up to a step
    assert least_frames(lambda f: f >= 95_000, floor=82_944) == 100_000
    assert least_frames(lambda f: False, most=1_000_000) is None  # never holds: no size, not a guess
