"""Command-line flags checked the way config keys are: the numeric types (`number`) and the
folder and store checks shared by every command (rlbench.report, rlbench.profile,
rlbench.predict, pipelines/); the parser that refuses them in one line, `<prog>: --flag=value:
allowed: ...`, and exit 2 is the commands' (rlbench/cli/command.py `Parser`). docs/jobs.md.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


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


def actor_counts(example: str) -> Callable[[str], list[int]]:
    """A flag type: comma-separated distinct actor counts >= 1 (`example` shows one in the error)."""
    positive = number(int, lo=1)

    def parse(text: str) -> list[int]:
        try:
            counts = [positive(t) for t in text.split(",")]
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"{text}: allowed: comma-separated integers >= 1, e.g. {example}"
            ) from None
        if len(set(counts)) != len(counts):
            raise argparse.ArgumentTypeError(f"{text}: allowed: distinct actor counts, e.g. {example}")
        return counts

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
