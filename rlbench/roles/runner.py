"""The runner: starts the role threads, watches them, hands each tick's metrics on.

Every tick the main thread samples the roles' counters, re-raises the first role failure and
enforces the time limit; however it leaves, it sets the stop event and joins the role threads
(after a signal for at most ROLE_STOP_S, naming any still running). docs/jobs.md, "Stopping a job".
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rlbench.core.metrics import TASK_ELAPSED
from rlbench.core.signals import JobPruned, raise_pending, where

log = logging.getLogger(__name__)

# How long the runner waits for the role threads once a signal (SIGTERM, Ctrl-C) stops them: the
# process ends next. A role looks at the stop event between two of its operations; one inside
# native code (ale-py resetting dozens of emulators: 6 s on a loaded 2-core host; a learner
# update) cannot be interrupted. Its daemon thread is named in the log and ends with the process.
ROLE_STOP_S = 2.0
# Any other end (the task done, a role failed, the time limit, a pruned trial) waits for every
# role up to this long: the process may run the next job of a search, which must not share
# the CPU with this one's roles, and the final metrics read the roles' counters once they stopped.
ROLE_JOIN_S = 120.0


class RoleFailed(RuntimeError):
    """A role thread raised; the original exception is the __cause__."""


class RoleThread(threading.Thread):
    """Runs one role; `scope()` is entered in the thread first (e.g. a CUDA green context)."""

    def __init__(self, role, stop: threading.Event, scope=contextlib.nullcontext, ended: threading.Event | None = None):
        super().__init__(name=role.name, daemon=True)
        self.role, self.stop, self.scope = role, stop, scope
        self.ended = ended or threading.Event()  # set when this role returns (the runner wakes on it)
        self.error: BaseException | None = None
        self.started_at = self.ended_at = None

    def run(self) -> None:
        self.started_at = time.perf_counter()
        try:
            with self.scope():
                self.role.run(self.stop)
        except BaseException as e:  # noqa: BLE001 - reported by the runner, never lost
            self.error = e
            self.stop.set()
        finally:
            self.ended_at = time.perf_counter()
            self.ended.set()

    def wall_s(self) -> float:
        if self.started_at is None:
            return 0.0
        return (self.ended_at or time.perf_counter()) - self.started_at


@dataclass
class Window:
    """Counters at the previous tick, for windowed rates."""

    t: float
    values: dict = field(default_factory=dict)

    def rates(self, now: float, values: dict) -> dict:
        dt = max(now - self.t, 1e-9)
        out = {k: (values[k] - self.values.get(k, 0)) / dt for k in values}
        self.t, self.values = now, dict(values)
        return out


def run_roles(
    trainer,
    on_tick: Callable[[dict, int], None],
    tick_s: float = 1.0,
    max_runtime_s: float = 0.0,
    scope=contextlib.nullcontext,
) -> dict:
    """on_tick(metrics, step) every `tick_s` (step: whole seconds since the task started; the
    metrics carry those seconds unrounded as `task_elapsed_s`, the window charts' x axis);
    returns trainer.measured(...): what the roles measured. Wakes as soon as a role ends, so runtime_s is when the last
    role ended (not at the next tick: with tracking.log_every_s=30 a task that ends at 18 s
    would read 30 s)."""
    stop, woken = threading.Event(), threading.Event()
    threads = [RoleThread(r, stop, scope, woken) for r in trainer.roles()]
    t0 = time.perf_counter()
    window, next_tick = Window(t0), t0 + tick_s
    for th in threads:
        th.start()
    signalled = False
    try:
        while True:
            woken.wait(max(next_tick - time.perf_counter(), 0.0))
            woken.clear()
            raise_pending()  # a SIGTERM whose JobKilled a finalizer swallowed
            _raise_role_error(threads)
            now = time.perf_counter()
            ended = all(th.ended_at is not None for th in threads)
            if max_runtime_s and (max(th.ended_at for th in threads) if ended else now) - t0 > max_runtime_s:
                raise TimeoutError(f"workload.max_runtime_s={max_runtime_s} exceeded before the task finished")
            if ended:
                break  # the task ended in this window: no tick of an idle process (the final metrics follow)
            if now < next_tick:
                continue  # a role ended mid-window; the others tick on schedule
            next_tick = max(next_tick + tick_s, now + tick_s)  # ticks >= tick_s apart: one per whole-second step
            on_tick(trainer.step_metrics(window, now) | {TASK_ELAPSED: now - t0}, int(now - t0))
    except KeyboardInterrupt as e:
        signalled = not isinstance(e, JobPruned)
        raise
    finally:
        stop.set()
        _join(threads, ROLE_STOP_S if signalled else ROLE_JOIN_S)
    runtime = max(th.ended_at for th in threads) - t0
    return trainer.measured(runtime, {th.role.name: th.wall_s() for th in threads}, started=t0)


def _join(threads: list[RoleThread], within_s: float) -> None:
    """Join the stopped role threads, all together for at most `within_s`; log those still running."""
    deadline = time.monotonic() + within_s
    for th in threads:
        th.join(max(deadline - time.monotonic(), 0.0))
    late = [f"'{th.name}' (in {where(th)})" for th in threads if th.is_alive()]
    if late:
        log.warning(
            "role %s had not stopped %g s after the stop: not waited for (it ends after its current "
            "operation, or with the process)",
            ", ".join(late),
            within_s,
        )


def _raise_role_error(threads) -> None:
    for th in threads:
        if th.error is not None:
            raise RoleFailed(f"role '{th.name}' failed: {th.error!r}") from th.error
