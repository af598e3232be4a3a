"""grpc and the protocol's stubs, imported after gRPC core's I/O engine is chosen (engine.py
`configure`): the modules of remote/ that use grpc take them from here (`from
rlbench.remote.grpc_core import grpc, pb_grpc`), so the engine is set before grpc's core starts,
whichever of them is imported first. docs/actors.md."""

from rlbench.remote.engine import configure

configure()  # read once when grpc's core starts: after `import grpc` it is too late

import grpc  # noqa: E402 - after configure(), on purpose

from rlbench.remote import actors_pb2_grpc as pb_grpc  # noqa: E402 - it imports grpc

__all__ = ["grpc", "pb_grpc"]
