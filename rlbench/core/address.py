"""What an actor server's address allows, and where its token comes from: pure, stdlib only,
so that config validation can refuse a bad address before any work (rlbench/prepare/validate.py;
docs/actors.md, "Faults and security")."""

from __future__ import annotations

import argparse
import ipaddress

TOKEN_ENV = "RLBENCH_ACTOR_TOKEN"  # the actor reads its token here; it is never logged nor put in a message
LOOPBACK_NAMES = ("localhost",)


def is_local(bind: str) -> bool:
    """Whether `bind` (unix:PATH, or HOST:PORT) can only be reached from this host."""
    if bind.startswith("unix:"):
        return True
    host = bind.rpartition(":")[0].strip("[]")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name or an empty host (every interface)


def cpu_list(text: str) -> list[int]:
    """CPUs as `taskset -c` writes them ("0-3", "0,2,5-6"); an argparse type: its error names
    the text and what is allowed."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: allowed: CPU numbers and ranges, e.g. 0-3 or 0,2") from None
    if not cpus or min(cpus) < 0:
        raise argparse.ArgumentTypeError(f"{text}: allowed: CPU numbers >= 0 and ranges, e.g. 0-3 or 0,2")
    return sorted(cpus)


def cpu_text(cpus) -> str:
    """The `--cpus` argument for `cpus`."""
    return ",".join(str(c) for c in cpus)
