"""A full disk: found wherever it sits in an error's chain (MLflow wraps SQLite's "database or
disk is full"), and the job's log file that stops writing at the first full-disk error instead of
printing each record, its traceback too, on stderr (logging's `--- Logging error ---` block).
docs/jobs.md, "A fault, a full disk".
"""

from __future__ import annotations

import contextlib
import errno
import logging
import sys

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # no space left; the disk quota used up
SQLITE_FULL = "database or disk is full"  # SQLite's SQLITE_FULL, as sqlite3 and SQLAlchemy word it


def is_full_disk(error: BaseException) -> bool:
    """`error` itself says the disk is full (an OSError's errno, SQLite's message)."""
    if isinstance(error, OSError) and error.errno in FULL_ERRNOS:
        return True
    return SQLITE_FULL in first_line(error)


def full_disk(error: BaseException) -> BaseException | None:
    """The innermost error of `error`'s chain (causes and contexts) that says the disk is full, or None."""
    chain, e = [], error
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return next((e for e in reversed(chain) if is_full_disk(e)), None)


def first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0]


class LogFile(logging.FileHandler):
    """Hydra's job log file (conf/config.yaml, hydra.job_logging): at the first record the full
    disk refuses, it closes and writes no more (`full` holds that error); logging's own handler
    would print every later record, with its traceback, on stderr. Other errors as logging's."""

    full: OSError | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.full is None:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        error = sys.exc_info()[1]
        if not (isinstance(error, OSError) and is_full_disk(error)):
            super().handleError(record)
            return
        self.full = error
        stream, self.stream = self.stream, None
        with contextlib.suppress(OSError, ValueError):  # its buffer cannot be flushed: the fd closes all the same
            stream.close()
