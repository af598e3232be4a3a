"""The errors a command ends with, typed: library code raises them and never exits the process
nor writes to stderr; the one command wrapper (rlbench/cli/command.py) prints `<prog>: <message>`
on stderr and exits with the class's code. `Refusal`: bad input, refused before any work
(exit 2); `Failure`: work ran and failed (exit 1). docs/architecture.md, "Errors and exit codes".
"""

from __future__ import annotations


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
