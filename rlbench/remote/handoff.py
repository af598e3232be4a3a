"""How a job's actor tasks find it: the learner writes the address its actor server is
reached at into a file of the job's folder on the shared disk; each task reads it, waiting for
it (a shared filesystem may show a new file late). The token never goes there: it stays in
the environment (TOKEN_ENV), which the tasks inherit. Standard library only. docs/scale-out.md.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from pathlib import Path

from rlbench.core.address import TOKEN_ENV

ADDRESS_FILE = "actor-server.address"
ANY_HOST = ("", "0.0.0.0", "[::]", "::")  # a bind on every interface: other hosts reach it by this host's name


def reachable(address: str, host: str | None = None) -> str:
    """What other hosts dial for a server listening on `address` (HOST:PORT): a bind on every
    interface is reached by this host's name (`host`, default socket.gethostname())."""
    bound, _, port = address.rpartition(":")
    return f"{host or socket.gethostname()}:{port}" if bound in ANY_HOST else address


def write_address(folder: Path, address: str) -> Path:
    """`address` into folder/ADDRESS_FILE, whole or not at all (written aside, then renamed:
    a reader never sees half of it); returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ADDRESS_FILE
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(address + "\n")
    aside.replace(path)
    return path


def read_address(path: Path, timeout_s: float, poll_s: float = 0.5) -> str:
    """The address in `path` once it exists; TimeoutError naming the file after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text:
            return text
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{path}: no actor server address after {timeout_s:g} s; the learner writes it when "
                f"it starts: is its folder on a disk this node shares (docs/scale-out.md)?"
            )
        time.sleep(poll_s)  # polling a file: a shared filesystem offers nothing to wait on


def ensure_token(environ=os.environ) -> bool:
    """A random token in `environ`[TOKEN_ENV] unless one is set (the job's actor tasks inherit
    the environment); True when it made one. The token is never written anywhere else."""
    if environ.get(TOKEN_ENV):
        return False
    environ[TOKEN_ENV] = secrets.token_urlsafe(32)
    return True
