"""Observers of a job's life, as sample-factory's are: the record, the telemetry, the progress
lines and a search's pruner each watch the job through these hooks (`JobObserver`), none of
them wired into the trainer's code. The hooks, their order and what each may do:
docs/jobs.md, "A job's observers".
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class JobObserver:
    def started(self, trainer) -> None:
        pass

    def tick_values(self, trainer) -> dict:
        return {}

    def tick(self, metrics: dict, step: int) -> None:
        pass

    def episode(self, ret: float, frames: int, evaluation: bool) -> None:
        pass

    def stopped(self) -> None:
        pass

    def final_values(self, final: dict, trainer) -> tuple[dict, dict]:
        return {}, {}

    def ended(self, final: dict, tags: dict) -> None:
        pass

    def closed(self, error: BaseException | None) -> None:
        pass


class Observers:
    """The job's observers, called in the order given (the record before a pruner that may
    stop the job, so the tick that stopped it is logged)."""

    def __init__(self, observers=()):
        self.all = [o for o in observers if o is not None]

    def started(self, trainer) -> None:
        for o in self.all:
            o.started(trainer)

    def tick(self, metrics: dict, step: int, trainer) -> None:
        for o in self.all:
            metrics = {**metrics, **o.tick_values(trainer)}
        for o in self.all:
            o.tick(metrics, step)

    def episode(self, ret: float, frames: int, evaluation: bool) -> None:
        for o in self.all:
            o.episode(ret, frames, evaluation)

    def stopped(self) -> None:
        for o in self.all:
            o.stopped()

    def final_values(self, final: dict, trainer) -> tuple[dict, dict]:
        metrics, tags = {}, {}
        for o in self.all:
            m, t = o.final_values(final, trainer)
            metrics |= m
            tags |= t
        return metrics, tags

    def ended(self, final: dict, tags: dict) -> None:
        for o in self.all:
            o.ended(final, tags)

    def closed(self, error: BaseException | None) -> None:
        for o in self.all:
            try:
                o.closed(error)
            except Exception as e:  # noqa: BLE001 - one observer's clean-up never hides the job's outcome
                log.warning("%s could not close: %s", type(o).__name__, e)
