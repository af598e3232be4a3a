"""Observers of a job's life, as sample-factory's are: the record, the telemetry, the progress
lines and a search's pruner each watch the job through these hooks, and none of them is
wired into the trainer's code.

`train` (rlbench/train/trainer.py) calls them in this order, each hook on every observer in the
order the job listed them:

  started(trainer)           the roles are built, not yet running
  tick_values(trainer)       every tick: values an observer adds to the tick (the telemetry's power)
  tick(metrics, step)        every tick: the tick's metrics (step: whole seconds since the start)
  episode(ret, frames, evaluation)   every episode that ended, training and evaluation envs'
  stopped()                  the roles have ended (however they ended)
  final_values(final, trainer) -> (metrics, tags)   what an observer adds to the final metrics
  ended(final, tags)         the final metrics, assembled once (trainer.py's `final_metrics`)
  closed(error)              always, last; error is the exception that ended the job, or None

Every hook is optional: the base class does nothing. `tick` may raise to stop the job (a
pruned search trial); `closed` must not raise (Observers logs and goes on).
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
