"""Can a local SQLite store be used? Checked with the standard library before MLflow or Optuna opens it.

`sqlite_problem` checks the path, its folder (writable, MIN_FREE_BYTES free) and the file (an
SQLite database with its `Kind`'s tables, or none yet), each answer a `Problem` for
rlbench/prepare/preflight.py's one line; the probes are separate functions, so tests can fake a full
disk. docs/scale-out.md, "Preflight, inside"."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

MIN_FREE_BYTES = 64 * 2**20  # a job's record (metrics, configs, telemetry CSVs and figures) is a few MiB
SQLITE_HEADER = b"SQLite format 3\x00"
LOCK_WAIT_S = 20.0  # as MLflow's own busy_timeout: another process writing is not a problem


@dataclass(frozen=True)
class Kind:
    """What a store holds: its name for messages and the tables every such database has."""

    what: str
    tables: frozenset[str]


MLFLOW = Kind("an MLflow tracking store", frozenset({"experiments", "runs", "metrics", "alembic_version"}))
OPTUNA = Kind("an Optuna study storage", frozenset({"studies", "trials", "version_info"}))


@dataclass(frozen=True)
class Problem:
    """Why a store cannot be used, and what the user can do about it."""

    cause: str
    todo: str


def sqlite_path(url: str) -> Path | None:
    """The file of a `sqlite:///` URL (relative to the working folder, or absolute with four
    slashes); None for any other URL and for an in-memory database."""
    if not url.startswith("sqlite:///"):
        return None
    path = urllib.parse.unquote(url.removeprefix("sqlite:///").split("?", 1)[0])
    return Path(path) if path and path != ":memory:" else None


def free_bytes(folder: Path) -> int:
    """Bytes free for this user on the disk holding `folder`."""
    return shutil.disk_usage(folder).free


def write_probe(folder: Path) -> None:
    """Create, write, sync and remove a small file in `folder`, as SQLite's journal will; raises
    the OSError a write there gets (EACCES, EROFS, ENOSPC, ...)."""
    fd, name = tempfile.mkstemp(prefix=".rlbench-write-probe-", dir=folder)
    try:
        os.write(fd, b"\0" * 4096)
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(name)


def write_error(e: OSError, place: Path, key: str) -> Problem:
    """A failed write as a Problem: a full disk, a read-only folder or file, or another error."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return Problem(
            f"no space left on the disk of {place} ({e.strerror})", f"free space there, or point {key} at another disk"
        )
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return Problem(
            f"{place} is read-only ({e.strerror})",
            f"make it writable for this user, or point {key} at a writable folder",
        )
    return Problem(f"cannot write in {place}: {e.strerror or e}", f"fix {place}, or point {key} elsewhere")


def _existing_folder(path: Path) -> Path:
    """The database's folder, or its nearest ancestor that exists (the store creates the rest)."""
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    return folder


def folder_problem(path: Path, key: str) -> Problem | None:
    """The folder the database goes in: a folder, writable, with room."""
    folder = _existing_folder(path)
    if not folder.is_dir():
        return Problem(f"{folder} is a file, not a folder", f"point {key} at a path inside a folder")
    try:
        write_probe(folder)
    except OSError as e:
        return write_error(e, folder, key)
    free = free_bytes(folder)
    if free < MIN_FREE_BYTES:
        return Problem(
            f"only {free / 2**20:.1f} MiB free on the disk of {folder} (at least {MIN_FREE_BYTES // 2**20} MiB needed)",
            f"free space there, or point {key} at another disk",
        )
    return None


def _header(path: Path, key: str) -> bytes | Problem:
    """The file's first 16 bytes, opened for writing as SQLite will (b"" for an empty file)."""
    try:
        with open(path, "r+b") as f:
            return f.read(len(SQLITE_HEADER))
    except OSError as e:
        return write_error(e, path, key)


def tables(path: Path) -> set[str]:
    """The tables of an SQLite file, read without writing (sqlite3.DatabaseError if it is not one)."""
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def file_problem(path: Path, kind: Kind, key: str) -> Problem | None:
    """An existing database file: writable, SQLite, and holding `kind`'s tables (or none)."""
    elsewhere = f"point {key} at {kind.what}'s file, or at a new path to start one"
    head = _header(path, key)
    if isinstance(head, Problem):
        return head
    if not head:
        return None  # an empty file: SQLite's new database
    if head != SQLITE_HEADER:
        return Problem(f"{path} is not an SQLite database (it starts with {head[:8]!r})", elsewhere)
    try:
        found = tables(path)
    except sqlite3.DatabaseError as e:
        return Problem(f"{path} cannot be read as an SQLite database: {e}", f"restore it from a backup, or {elsewhere}")
    if found and not kind.tables <= found:
        other = next((k.what for k in (MLFLOW, OPTUNA) if k != kind and k.tables <= found), None)
        held = f"it is {other}" if other else "its tables: " + ", ".join(sorted(found)[:6])
        return Problem(f"{path} is not {kind.what} ({held})", elsewhere)
    return None


def sqlite_problem(url: str, kind: Kind, key: str, reading: bool = False) -> Problem | None:
    """Why the SQLite store at `url` cannot be used as `kind`, or None. reading: the command
    only reads it (a report, a prediction), so a store that does not exist yet is a problem."""
    path = sqlite_path(url)
    if path is None:
        return None
    if path.is_dir():
        return Problem(
            f"{path} is a folder, not a database file",
            f"name the database file, e.g. {key}=sqlite:///{path.as_posix().rstrip('/')}/mlflow.db",
        )
    if reading and not path.exists():
        return Problem(
            f"no database at {path.absolute()}", f"run a job first, or point {key} at the store that holds the runs"
        )
    return folder_problem(path, key) or (file_problem(path, kind, key) if path.exists() else None)
