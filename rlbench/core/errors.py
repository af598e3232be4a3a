"""The errors a command ends with, typed: library code raises them and never exits the process
nor writes to stderr; the one command wrapper (rlbench/cli/command.py) prints `<prog>: <message>`
on stderr and exits with the class's code. `Refusal`: bad input, refused before any work
(exit 2); `Failure`: work ran and failed (exit 1). docs/architecture.md, "Errors and exit codes".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class CommandError(Exception):
    """An error a command ends with: its message is the line after `<prog>: `."""

    exit_code = 1


class Refusal(CommandError):
    """Bad input (a key, a value, a flag, a store), refused before any work starts: exit 2.
    The message names the key, its value and what is allowed."""

    exit_code = 2


class Failure(CommandError):
    """Work ran and failed (a sweep's jobs): exit 1."""

    exit_code = 1


class Carried(BaseException):
    """A typed error carried through Hydra, which turns any Exception raised in a task function
    or a sweeper into a traceback and exit 1 and lets a BaseException pass: the command's wrapper
    (rlbench/cli/command.py exits) says its line and exits; the Python API (rlbench/api/) raises
    the error itself."""

    def __init__(self, error: Exception):
        super().__init__(error)  # args: the error itself, so that it survives a launcher's pickling
        self.error = error

    def __str__(self) -> str:
        return str(self.error)


@contextlib.contextmanager
def carried(refusing: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """The typed errors (and `refusing`) raised inside, as Carried: where Hydra calls back into
    rlbench (the task function, the sweeper)."""
    try:
        yield
    except (CommandError, *refusing) as e:
        raise Carried(e) from e
