"""What an actor server's address allows, and where its token comes from: pure, stdlib only,
so that config validation can refuse a bad address before any work (rlbench/config/validate.py)."""

from __future__ import annotations

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
