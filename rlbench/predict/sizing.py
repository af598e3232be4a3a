"""A job's task sized by what it must hold rather than by frames: the fewest frames whose
predicted job (rlbench.predict.jobs) holds, e.g., S seconds of steady windows (the seconds its
actors and its learner both run). Pure: the prediction is given. The study's use:
rlbench/api/study_host.py sized_frames; docs/gpu.md.
"""

from __future__ import annotations

from collections.abc import Callable

FRAMES_STEP = 10_000
FRAMES_MOST = 50_000_000


def least_frames(
    holds: Callable[[int], bool], floor: int = 0, step: int = FRAMES_STEP, most: int = FRAMES_MOST
) -> int | None:
    """The fewest frames, a multiple of `step` and at least `floor`, for which `holds(frames)`
    (which must be monotone: more frames never hold less); None where not even `most` holds."""
    lowest = max(step, -(-floor // step) * step)
    hi = lowest
    while not holds(hi):
        if hi >= most:
            return None
        hi = min(most, hi * 2)
    lo = lowest - step if hi == lowest else hi // 2 // step * step  # lo does not hold (or is below the floor)
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi
