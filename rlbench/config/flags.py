"""Command-line flags refused the way config keys are: one parser (`Parser`) and one set of
numeric types (`number`) shared by every command (rlbench.report, rlbench.profile,
rlbench.predict, pipelines/): one line, `<prog>: --flag=value: allowed: ...`, and exit 2.
docs/jobs.md, "Refused early".
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


def refuse(prog: str, message: str) -> NoReturn:
    """The one refusal of every command: `<prog>: <message>` on stderr, exit 2."""
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(2)


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


def number(
    kind: type = float,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    note: str = "",
) -> Callable[[str], float]:
    """An argparse `type`: a finite `kind` (int or float) within [lo, hi] (open ends where said)."""
    what = "an integer" if kind is int else "a finite number"
    ends = []
    if lo is not None and hi is not None:
        ends.append(f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}")
    elif lo is not None:
        ends.append(f"{'>' if lo_open else '>='} {lo:g}")
    elif hi is not None:
        ends.append(f"{'<' if hi_open else '<='} {hi:g}")
    allowed = " ".join([what, *ends]) + (f" ({note})" if note else "")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text}: allowed: {allowed}") from None
        if not math.isfinite(value) or not within(value, lo, hi, lo_open, hi_open):
            raise argparse.ArgumentTypeError(f"{text}: allowed: {allowed}")
        return value

    parse.__name__ = kind.__name__
    return parse


def within(value: float, lo: float | None, hi: float | None, lo_open: bool = False, hi_open: bool = False) -> bool:
    if lo is not None and (value <= lo if lo_open else value < lo):
        return False
    return not (hi is not None and (value >= hi if hi_open else value > hi))


def writable_folder(flag: str, path: Path) -> str | None:
    """Why `path` cannot be a folder this command writes into, or None: checked before any work.
    The folder itself, or the first one above it that exists, must take a new entry (tried with a
    temporary folder, removed at once: permission bits do not tell for root or a read-only mount)."""

    if path.exists() and not path.is_dir():
        return f"{flag}={path}: exists and is not a folder; allowed: a folder this user can create or write"
    above = path.absolute()
    while not above.exists():
        above = above.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".rlbench-write-check-", dir=above))
    except OSError as e:
        return (
            f"{flag}={path}: cannot be written ({above}: {e.strerror or e}); "
            "allowed: a folder this user can create or write"
        )
    return None


def existing_store(flag: str, uri: str, hint: str = "") -> str | None:
    """Why a command that only reads runs cannot use `uri`, or None: a SQLite file that does not
    exist holds no run, and opening it would create an empty store."""
    if not uri.startswith("sqlite:///"):
        return None  # a server or database: preflight reaches it
    path = Path(uri.removeprefix("sqlite:///"))
    if path.is_file():
        return None
    what = "is a folder, not a database file" if path.is_dir() else "does not exist (no run was recorded there)"
    return (
        f"{flag}={uri}: {path} {what}; allowed: the store your runs are in "
        f"(default $MLFLOW_TRACKING_URI, else sqlite:///mlruns/mlflow.db, relative to this folder){hint}"
    )
