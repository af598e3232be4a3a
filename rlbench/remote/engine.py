"""gRPC core's I/O engine for the actor protocol, chosen before grpc is imported.

grpcio 1.85's default posix EventEngine reads and writes the sockets on its own thread pool
and hands every completed read and write to the completion queue's poller: on the actor
protocol's small lock-step messages that is one more thread wake-up each way, paid per
message in both processes. With its client and listener experiments off (GRPC_EXPERIMENTS,
gRPC core's documented switch, read once when grpc's core starts) the thread that polls the
completion queue does the socket I/O itself. Measured on this project's 2-core VM (a stub
actor pair answering 20-frame Steps, alternated, 5 runs each): 528 -> 423 us of CPU per
round trip, both processes together (docs/actors.md). Applied only where it was measured
(grpcio 1.85.x: a later grpcio may drop these experiments, and gRPC logs an error for an
unknown one) and never over a GRPC_EXPERIMENTS the user set. The actor processes inherit it
from the job's environment and set it themselves when started by hand."""

from __future__ import annotations

import os
import sys
from importlib import metadata

EXPERIMENTS = "-event_engine_client,-event_engine_listener"
MEASURED_MINOR = (1, 85)


def experiments_setting(environ, grpc_version: str | None, grpc_imported: bool) -> str | None:
    """The GRPC_EXPERIMENTS value to set, or None: the user set one, grpc's core has started
    already (too late to apply), or grpcio is not a version these experiments were measured on."""
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
