"""How a job is stopped from outside: SIGTERM (a scheduler, `kill`), Ctrl-C and a search's pruner.

SIGTERM and the pruner raise KeyboardInterrupt subclasses (JobKilled, JobPruned), which unwind
the job like Ctrl-C and end its run KILLED; `stopped` prints the command's last line and gives
the exit code (143, 130). Light on purpose. docs/jobs.md, "Stopping a job".
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time

import psutil

# A single job's process ends at most this long after a SIGTERM, recorded or not (`_exit_late`).
# Its stop takes ROLE_STOP_S (rlbench/roles/runner.py) for the roles, then the record's last
# writes; measured on a loaded 2-core host: docs/jobs.md, "Stopping a job".
STOP_BOUND_S = 8.0


class JobKilled(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(f"signal {signum}")
        self.signum = signum


class JobPruned(KeyboardInterrupt):
    """Raised by a search's pruner from a job's tick: the job stops early and ends KILLED."""


@contextlib.contextmanager
def sigterm_raises(exit_within_s: float | None = None):
    """In the main thread, turn SIGTERM into JobKilled so the job ends KILLED and cleans up; neither
    it nor Ctrl-C's KeyboardInterrupt cuts a store call short (`_outermost_store_frame`).
    exit_within_s: the process ends that long after the first SIGTERM, however far the clean-up
    got (`_exit_late`: its line names where it was)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    deadline_started: list[bool] = []  # the backstop runs once, from the first SIGTERM
    deferred: list = []  # (error, cancel) while a stop waits for a store call to return

    def _stop(error: KeyboardInterrupt, frame) -> None:
        store = _outermost_store_frame(frame)
        if store is not None:  # raised where that call returns: see _raise_on_return
            deferred.append((error, _raise_on_return(store, error, deferred.clear)))
            return
        _pending[:] = [error]
        raise error

    def _on_sigterm(signum, frame):
        if deferred:  # the first stop waits for a store call to return; this one adds nothing
            return
        error = JobKilled(signum)
        if exit_within_s is not None and not deadline_started:
            deadline_started.append(True)
            threading.Thread(
                target=_exit_late, args=(error, exit_within_s), name="sigterm-deadline", daemon=True
            ).start()
        _stop(error, frame)

    def _on_sigint(signum, frame):
        if deferred:  # Ctrl-C again while a store call finishes (or hangs): stop here, as Python would
            error, cancel = deferred.pop()
            cancel()
            _pending[:] = [error]
            raise error
        _stop(KeyboardInterrupt(), frame)

    def _unraisable(unraisable):  # a finalizer swallowed it: raise_pending raises it again, so no traceback
        if not (isinstance(unraisable.exc_value, JobKilled) or unraisable.exc_value in _pending):
            hook(unraisable)

    previous, hook = signal.signal(signal.SIGTERM, _on_sigterm), sys.unraisablehook
    # Ctrl-C only where Python's own handler has it: a SIGINT that started ignored stays ignored
    sigint = signal.getsignal(signal.SIGINT)
    if sigint is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    sys.unraisablehook = _unraisable
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if sigint is signal.default_int_handler:
            signal.signal(signal.SIGINT, sigint)
        sys.unraisablehook = hook
        _pending.clear()


# The stop (JobKilled, or Ctrl-C's KeyboardInterrupt) a handler last raised. Python runs a
# handler between any two bytecodes of the main thread, finalizers and weakref callbacks
# included, and there an exception is printed ("Exception ignored in ...") and dropped, and the
# job goes on (e.g. inside SQLAlchemy's registry cleanup). The job's main loop raises it again
# (raise_pending), and sigterm_raises keeps Python from printing the dropped one's traceback.
_pending: list[KeyboardInterrupt] = []


# Store code (MLflow's client and stores, SQLAlchemy, sqlite3) that a JobKilled must not
# interrupt: raised inside a query, it leaves sqlite's statement open, kept alive by the
# exception's traceback, and its read lock makes every later write of the process (the run's
# end as KILLED) wait 20 s and fail with "database is locked". docs/jobs.md, "Stopping a job".
STORE_CODE = frozenset({"mlflow", "sqlalchemy", "sqlite3", "alembic"})


def _outermost_store_frame(frame):
    """The outermost STORE_CODE frame between `frame`, the top of the stack, and rlbench's
    first frame under it (the caller a JobKilled is raised to), or None."""
    outermost = None
    while frame is not None:
        package = frame.f_globals.get("__name__", "").partition(".")[0]
        if package == "rlbench":
            break
        if package in STORE_CODE:
            outermost = frame
        frame = frame.f_back
    return outermost


def _raise_on_return(target, error: KeyboardInterrupt, on_raise):
    """Raise `error` in the main thread as `target` (the outermost store call) returns, to its
    caller: a profile function, set for the main thread (the signal handler's) until then.
    Returns the function that takes that profile function off again."""
    previous = sys.getprofile()

    def _profile(frame, event, arg):
        if previous is not None:
            previous(frame, event, arg)
        if frame is target and event == "return":
            sys.setprofile(previous)
            on_raise()
            _pending[:] = [error]
            raise error  # propagates from the returning call into its caller

    sys.setprofile(_profile)
    return lambda: sys.setprofile(previous)


def raise_pending() -> None:
    """Raise the SIGTERM that a finalizer swallowed (see _pending), once; called by the job's
    main loop every tick. After a raise that unwound the job this is never reached again."""
    if _pending:
        raise _pending.pop()


@contextlib.contextmanager
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


def _exit_late(error: JobKilled, after_s: float) -> None:
    """The stop's backstop (a daemon thread): `after_s` after the SIGTERM, if the process still
    runs (e.g. a store write that waits on a lock or a server), kill its child processes (actor
    processes), print the command's line with where the main thread was and exit 143 without
    further clean-up. A run not yet ended KILLED reads RUNNING until the next rlbench start
    closes it KILLED (tracking/orphans.py)."""
    time.sleep(after_s)
    late = (
        f"the job had not ended {after_s:g} s after the signal (main thread in {where(threading.main_thread())}): "
        "exited there; a run it left RUNNING is closed KILLED by the next rlbench start"
    )
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
    exit_stopped(error, late=late, wait=False)


def exit_stopped(error: KeyboardInterrupt, command: str = "rlbench", late: str = "", wait: bool = True) -> None:
    """Print the stopped command's line (`stopped`) and end the process with its code at once,
    skipping Python's finalization, which can take seconds on a loaded host (a full garbage
    collection while ale-py's threads still reset emulators); all is recorded by then. Once per
    process: with wait=False (the backstop) it returns where the main thread is already ending it,
    and flushes nothing a blocked main thread may hold (the log handlers write each record)."""
    if not _ending.acquire(blocking=wait):
        return
    code = stopped(error, command, late)
    if wait:
        logging.shutdown()
        sys.stdout.flush()
    os._exit(code)


_ending = threading.Lock()


def where(thread: threading.Thread) -> str:
    """The innermost Python frame `thread` runs: file:line function."""
    frame = sys._current_frames().get(thread.ident)
    if frame is None:
        return "no Python frame"
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno} {frame.f_code.co_name}"


def note_record(error: BaseException, what: str, run_id: str, status: str) -> None:
    """Note on a stopping exception that `what` (a job's run, a sweep's parent) ended `status`."""
    with contextlib.suppress(AttributeError):
        error.records = [*getattr(error, "records", []), (what, run_id, status)]


def stopped(error: KeyboardInterrupt, command: str = "rlbench", late: str = "") -> int:
    """Print the one line a stopped command ends with (what was stopped, what each run it
    recorded ended as; `late`: why it ended before its clean-up did) and return its exit code:
    128 + the signal's number."""
    signum = getattr(error, "signum", signal.SIGINT)
    name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name
    records = getattr(error, "records", [])
    said = "; ".join(f"{what} {run_id} {recorded(status)}" for what, run_id, status in records)
    said = "; ".join(filter(None, [said, late])) or "nothing was recorded"
    print(f"{command}: stopped by {name}: {said}", file=sys.stderr, flush=True)
    return 128 + signum


def recorded(status: str) -> str:
    """What a run's status in the store says on a command's last line; RUNNING: its end could
    not be written (a full disk, a server gone)."""
    if status == "RUNNING":
        return UNENDED
    return f"recorded as {status}"


UNENDED = "reads RUNNING: its end could not be written; the next rlbench start closes it KILLED"
