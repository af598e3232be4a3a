"""How a job is stopped from outside: SIGTERM (a scheduler, `kill`), Ctrl-C and a search's pruner.

SIGTERM and the pruner raise KeyboardInterrupt subclasses (JobKilled, JobPruned), which unwind
the job like Ctrl-C and end its run KILLED; `stopped` prints the command's last line and gives
the exit code (143, 130). Light on purpose. docs/jobs.md, "Stopping a job".
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager


class JobKilled(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(f"signal {signum}")
        self.signum = signum


class JobPruned(KeyboardInterrupt):
    """Raised by a search's pruner from a job's tick: the job stops early and ends KILLED."""


@contextmanager
def sigterm_raises():
    """In the main thread, turn SIGTERM into JobKilled so the job ends KILLED and cleans up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum, frame):
        error = JobKilled(signum)
        _pending[:] = [error]
        raise error

    def _unraisable(unraisable):  # a finalizer swallowed it: raise_pending raises it again, so no traceback
        if not isinstance(unraisable.exc_value, JobKilled):
            hook(unraisable)

    previous, hook = signal.signal(signal.SIGTERM, _handler), sys.unraisablehook
    sys.unraisablehook = _unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook
        _pending.clear()


# The JobKilled the SIGTERM handler last raised. Python runs a handler between any two
# bytecodes of the main thread, finalizers and weakref callbacks included, and there an
# exception is printed ("Exception ignored in ...") and dropped, and the job goes on (e.g.
# inside SQLAlchemy's registry cleanup). The job's main loop raises it again (raise_pending),
# and sigterm_raises keeps Python from printing the dropped one's traceback.
_pending: list[JobKilled] = []


def raise_pending() -> None:
    """Raise the SIGTERM that a finalizer swallowed (see _pending), once; called by the job's
    main loop every tick. After a raise that unwound the job this is never reached again."""
    if _pending:
        raise _pending.pop()


@contextmanager
def sigterm_ends_at_once():
    """While native code holds the interpreter for long (ale-py creating hundreds of envs: seconds),
    no Python handler can run, so a SIGTERM would wait for it: here SIGTERM takes its default
    action instead and ends the process at once (exit 143). Its open runs are closed KILLED,
    with the reason, by the next rlbench start (rlbench/tracking/orphans.py)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def note_record(error: BaseException, what: str, run_id: str, status: str) -> None:
    """Note on a stopping exception that `what` (a job's run, a sweep's parent) ended `status`."""
    try:
        error.records = [*getattr(error, "records", []), (what, run_id, status)]
    except AttributeError:
        pass


def stopped(error: KeyboardInterrupt, command: str = "rlbench") -> int:
    """Print the one line a stopped command ends with (what was stopped, what each run it
    recorded ended as) and return its exit code: 128 + the signal's number."""
    signum = getattr(error, "signum", signal.SIGINT)
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name
    records = getattr(error, "records", [])
    said = "; ".join(f"{what} {run_id} recorded as {status}" for what, run_id, status in records)
    print(f"{command}: stopped by {name}: {said or 'nothing was recorded'}", file=sys.stderr, flush=True)
    return 128 + signum
