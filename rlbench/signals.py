"""How a job is stopped from outside: SIGTERM (a scheduler, `kill`) and a search's pruner.

Both are KeyboardInterrupt subclasses so that they unwind the job like Ctrl-C and end its run
KILLED (rlbench.tracking.record). Light on purpose: the sweeper installs the handler before
the heavy imports.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class JobKilled(KeyboardInterrupt):
    """Raised in the main thread by the SIGTERM handler."""


class JobPruned(KeyboardInterrupt):
    """Raised by a search's pruner from a job's tick: the job stops early and ends KILLED."""


@contextmanager
def sigterm_raises():
    """In the main thread, turn SIGTERM into JobKilled so the job ends KILLED and cleans up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _handler(signum, frame):
        raise JobKilled(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
