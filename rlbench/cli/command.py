"""The one command wrapper: a typed error (rlbench/core/errors.py) becomes `<prog>: <message>`
on stderr and its exit code; `Parser` refuses flags the same way. Only the commands use it, and
nothing below them exits the process or writes to stderr (tests/test_errors.py checks it).
docs/architecture.md, "Errors and exit codes"; docs/jobs.md, "Refused early"."""

from __future__ import annotations

import argparse
import contextlib
import functools
import re
import sys
from collections.abc import Callable, Iterator
from typing import NoReturn

from rlbench.core.errors import Carried, CommandError, Refusal
from rlbench.prepare.preflight import TRACKING_KEY, check

REFUSED = Refusal.exit_code


def say(prog: str, message: str) -> None:
    """A command's last line on stderr."""
    print(f"{prog}: {message}", file=sys.stderr)


def ended(prog: str, error: BaseException) -> int:
    """Say what ended the command; its exit code: the typed error's, else a refusal's (2) for
    the other errors a command names as refusals."""
    say(prog, str(error))
    return error.exit_code if isinstance(error, CommandError) else REFUSED


@contextlib.contextmanager
def exits(prog: str, refusing: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """The typed errors (and `refusing`, as refusals) raised inside: one line, then SystemExit
    with the code. Also where Hydra calls back into rlbench (the task function, the sweeper):
    Hydra turns any Exception into a traceback and exit 1, a SystemExit passes through it."""
    try:
        yield
    except Carried as c:  # carried through Hydra (rlbench/core/errors.py carried)
        raise SystemExit(ended(prog, c.error)) from None
    except (CommandError, *refusing) as e:
        raise SystemExit(ended(prog, e)) from None


def command(prog: str, refusing: tuple[type[Exception], ...] = ()) -> Callable:
    """A command's `main(argv) -> int` wrapped: a typed error (and `refusing`) returns its code
    after one line, so callers in-process (pipelines, tests) read the code as the shell would."""

    def wrap(main: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(main)
        def run(*args, **kwargs) -> int:
            try:
                return main(*args, **kwargs)
            except (CommandError, *refusing) as e:
                return ended(prog, e)

        return run

    return wrap


def refuse(prog: str, message: str) -> NoReturn:
    """A refusal where no wrapper is around (argparse's error): one line, exit 2."""
    with exits(prog):
        raise Refusal(message)


def preflight_or_exit(
    tracking_uri: str, storage: str | None = None, *, prog: str = "rlbench", key: str = TRACKING_KEY, reading=False
) -> None:
    """The stores can be used (rlbench/prepare/preflight.py check), or one line and exit 2
    before any job or run exists: what the pipelines do first."""
    with exits(prog):
        check(tracking_uri, storage, key=key, reading=reading)


class Parser(argparse.ArgumentParser):
    """argparse with rlbench's refusal: one line naming the flag, its value and what is allowed."""

    def error(self, message: str) -> NoReturn:
        m = re.fullmatch(r"argument ([^:]+): (.*)", message, re.DOTALL)
        if m:
            flag, why = m.group(1).split("/")[-1], m.group(2)
            choice = re.fullmatch(r"invalid choice: '?(.*?)'? \(choose from (.*)\)", why)
            if choice:
                why = f"{choice.group(1)}: allowed: one of {choice.group(2)}"
            message = f"{flag}={why}" if ": allowed:" in why else f"{flag}: {why}"
        refuse(self.prog, message)

    def parse_args(self, args=None, namespace=None):
        """Flags and positional overrides in any order (argparse's intermixed parsing)."""
        return self.parse_intermixed_args(args, namespace)
