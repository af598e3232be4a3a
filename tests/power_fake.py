"""Test-only power meters for the power-source seam (rlbench/telemetry/sources.py)."""

from rlbench.telemetry.sources import Reading


class FiftyWatts:
    """A meter that always reads 50 W and has no energy counter (its energy is power x time)."""

    WATTS = 50.0

    def __init__(self) -> None:
        self.closed = False

    def sample(self) -> Reading:
        return Reading(watts=self.WATTS)

    def close(self) -> None:
        self.closed = True


class Unplugged:
    """A meter that reads nothing and says why."""

    reason = "the fake meter is unplugged"

    def sample(self) -> Reading:
        return Reading()
