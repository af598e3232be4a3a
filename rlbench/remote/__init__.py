"""Actors in other processes and on other hosts: SEED RL's actor protocol over gRPC.

actors.proto (the wire; its stubs actors_pb2*.py generated and checked in), wire.py, stacks.py,
slots.py, hub.py, server.py (`RemoteEnvs`), actor_loop.py (the actor's loop), and grpc_core.py,
which imports grpc after engine.py picked gRPC core's I/O engine. docs/actors.md.
"""
