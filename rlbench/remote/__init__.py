"""Actors in other processes and on other hosts: SEED RL's actor protocol over gRPC.

actors.proto (the wire; its stubs actors_pb2*.py generated and checked in), wire.py, stacks.py,
slots.py, hub.py, server.py (`RemoteEnvs`), actor.py (the actor's loop) and engine.py, which
picks gRPC core's I/O engine before anything here imports grpc. docs/actors.md.
"""

from rlbench.remote.engine import configure

configure()
