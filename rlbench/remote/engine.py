"""gRPC core's I/O engine for the actor protocol, chosen before grpc is imported.

With grpcio's EventEngine client and listener experiments off (GRPC_EXPERIMENTS), the thread
polling the completion queue does the socket I/O itself: one thread wake-up less per message
each way. Only on grpcio 1.85.x, never over the user's own setting; why, and what it saves:
docs/actors.md, "The transport's cost per message"."""

from __future__ import annotations

import os
import sys
from importlib import metadata

EXPERIMENTS = "-event_engine_client,-event_engine_listener"
MEASURED_MINOR = (1, 85)


def experiments_setting(environ, grpc_version: str | None, grpc_imported: bool) -> str | None:
    """The GRPC_EXPERIMENTS value to set, or None: the user set one, grpc's core has started
    already (too late to apply), or grpcio is not 1.85.x, the version docs/actors.md gives their cost on."""
    if "GRPC_EXPERIMENTS" in environ or grpc_imported or not grpc_version:
        return None
    try:
        minor = tuple(int(x) for x in grpc_version.split(".")[:2])
    except ValueError:
        return None
    return EXPERIMENTS if minor == MEASURED_MINOR else None


def configure(environ=os.environ) -> str | None:
    """Set GRPC_EXPERIMENTS in `environ` where experiments_setting says so; the value set, or None."""
    try:
        version = metadata.version("grpcio")
    except metadata.PackageNotFoundError:
        version = None
    value = experiments_setting(environ, version, "grpc" in sys.modules)
    if value is not None:
        environ["GRPC_EXPERIMENTS"] = value
    return value
