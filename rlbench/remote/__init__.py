"""Actors in other processes and on other hosts: SEED RL's actor protocol over gRPC.

`actors.proto` defines the wire (its stubs, actors_pb2*.py, are generated and checked in);
`wire.py` turns specs, steps and addresses into messages and back (pure); `stacks.py`
rebuilds the frame stacks per global env id; `slots.py` hands out contiguous global env id
ranges; `hub.py` is the state the gRPC threads and the job's thread share (one condition);
`server.py` is `RemoteEnvs`, a VectorEnv whose envs live in actor processes; `actor.py` is
the actor process's loop (`python -m rlbench.actor`); `engine.py` picks gRPC core's I/O
engine, before anything here imports grpc.
"""

from rlbench.remote.engine import configure

configure()
