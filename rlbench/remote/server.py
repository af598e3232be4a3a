"""`RemoteEnvs`: a VectorEnv whose envs live in actor processes (`python -m rlbench.actor`)
connected over gRPC, one bidirectional stream each (SEED RL's grpc/service.proto). Threads:
gRPC's, one per stream (`_Servicer.Connect`), and the caller's (reset, recv, send,
take_disconnected, close), meeting in the Hub's condition and each stream's outbox.
Batching and stacks: docs/actors.md, "What runs where".
"""

from __future__ import annotations

import hmac
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from rlbench.config.rules import ConfigError
from rlbench.core.address import is_local
from rlbench.core.metrics import proc_role
from rlbench.envs.spec import EnvSpec
from rlbench.envs.vector import StepBatch, resolve_inference_batch
from rlbench.remote import actors_pb2 as pb
from rlbench.remote.grpc_core import grpc, pb_grpc
from rlbench.remote.hub import Hub, Refused, RemoteError, Stream
from rlbench.remote.stacks import FrameStacks
from rlbench.remote.telemetry import counted_threads, host_rows, process_rows
from rlbench.remote.wire import (
    PROTOCOL_VERSION,
    SERVER_OPTIONS,
    decode_step,
    spec_difference,
    spec_message,
    step_size,
    token_of,
)

log = logging.getLogger(__name__)

STATUS = {
    "token": grpc.StatusCode.UNAUTHENTICATED,
    "protocol": grpc.StatusCode.FAILED_PRECONDITION,
    "spec": grpc.StatusCode.FAILED_PRECONDITION,
    "full": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "closing": grpc.StatusCode.UNAVAILABLE,
}

__all__ = ["RemoteEnvs", "RemoteError"]


class RemoteEnvs:
    """`num_envs` envs of `env_cfg` (a family's Schema; `spec`: its probed EnvSpec) stepped by
    actor processes that connect to `bind` (unix:PATH or HOST:PORT, port 0: any free one;
    `address` is what actors are given). A non-loopback bind needs a `token`. reset() waits up
    to `join_timeout_s` for actors holding exactly num_envs envs; recv() raises RemoteError
    once no actor has been connected for `idle_timeout_s`. `spans`: the actors send their
    operations' spans (the job records a timeline: `trace_tracks`)."""

    def __init__(
        self,
        env_cfg,
        spec: EnvSpec,
        num_envs: int,
        batch: int = 0,
        bind: str = "127.0.0.1:0",
        token: str | None = None,
        join_timeout_s: float = 60.0,
        idle_timeout_s: float = 60.0,
        close_grace_s: float = 3.0,
        spans: bool = False,
    ):
        if not is_local(bind) and not token:
            raise ConfigError(
                f"actor_server.bind={bind}: a non-loopback address needs a token (actor_server.token, "
                f"sent by actors from RLBENCH_ACTOR_TOKEN); allowed without one: 127.0.0.1, ::1, "
                f"localhost or unix:PATH"
            )
        self.frameskip = int(env_cfg.frameskip)
        self.obs_shape, self.obs_dtype = tuple(spec.obs_shape), np.dtype(spec.obs_dtype)
        self.num_actions, self.num_envs = int(spec.num_actions), num_envs
        self.inference_batch = resolve_inference_batch(batch, num_envs)  # envs per recv(): whole Steps, >= this
        self._frame_shape = tuple(spec.frame_shape)
        self._hub = Hub(num_envs, join_timeout_s, idle_timeout_s)
        self._stacks = FrameStacks(num_envs, spec.stack, self._frame_shape, self.obs_dtype)
        self._last: list[tuple[Stream, int, int]] = []  # the last batch: (stream, start, envs)
        self._grace = close_grace_s
        self._closed = False
        servicer = _Servicer(self._hub, spec_message(env_cfg, spec), token, self._frame_shape, self.obs_dtype, spans)
        # one worker per stream for its life; at most num_envs streams hold envs, a few more are being refused
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=num_envs + 4, thread_name_prefix="actor-stream"), options=SERVER_OPTIONS
        )
        pb_grpc.add_ActorsServicer_to_server(servicer, self._server)
        self.address = self._listen(bind)
        self._server.start()

    def _listen(self, bind: str) -> str:
        try:
            port = self._server.add_insecure_port(bind)
        except RuntimeError as e:
            raise ConfigError(
                f"actor_server.bind={bind}: cannot listen there ({e}); allowed: a free port "
                f"(0: any) on an address of this host, or unix:PATH in a writable folder"
            ) from None
        if port == 0:
            raise ConfigError(
                f"actor_server.bind={bind}: cannot listen there (port in use?); allowed: a free port "
                f"(0: any) on an address of this host, or unix:PATH in a writable folder"
            )
        return bind if bind.startswith("unix:") else f"{bind.rpartition(':')[0]}:{port}"

    @property
    def threads_used(self) -> int:
        """CPU threads the actor processes step the envs on: per host, those the processes that
        last held the envs declared, capped at its hardware threads (remote/telemetry.py)."""
        return counted_threads(self._hub.every_stream())

    def process_rows(self) -> list[dict]:
        """Every actor process that joined, one row each (remote/telemetry.py process_rows)."""
        return process_rows(self._hub.every_stream())

    def host_rows(self) -> list[dict]:
        return host_rows(self._hub.every_stream())

    def trace_tracks(self, t0: float, window_s: float) -> list[tuple[str, list]]:
        """One timeline track per actor process that sent spans, on the job's clock (perf_counter,
        origin t0): (thread name, [SpanRecorder]), for rlbench/telemetry/trace.py."""
        tracks = []
        for s in sorted(self._hub.every_stream(), key=lambda s: s.index):
            rec = s.trace.recorder(proc_role(s.index), t0, window_s)
            if rec is not None:
                tracks.append((f"actor process {s.index} ({s.host}, pid {s.pid})", [rec]))
        return tracks

    @property
    def counts(self) -> dict[str, int]:
        """joins, rejoins, disconnects, refused_token / _protocol / _spec / _full."""
        return dict(self._hub.counts)

    def actors(self) -> list[dict]:
        """The connected actor processes: host, pid, run_id, first id, envs, threads, last Report."""
        return [
            {
                "host": s.host,
                "pid": s.pid,
                "run_id": s.run_id,
                "first_env_id": s.first,
                "envs": s.envs,
                "threads": s.threads,
                "report": s.report,
            }
            for s in self._hub.streams()
        ]

    def wire_bytes(self) -> dict[str, int]:
        """Serialized message bytes received and sent over every stream so far, and the env steps
        they carried (gRPC and HTTP/2 framing add about 14 bytes per message, not counted)."""
        every = self._hub.every_stream()
        return {
            "received": sum(s.bytes_in for s in every),
            "sent": sum(s.bytes_out for s in every),
            "env_steps": sum(s.env_steps for s in every),
        }

    def reset(self, seed: int) -> StepBatch:
        """Every env's first observation, ordered by global id, once the expected envs joined."""
        steps = sorted(self._hub.take_first(seed), key=lambda item: item[0].first)
        return self._batch(steps)

    def recv(self) -> StepBatch:
        return self._batch(self._hub.take_ready(self.inference_batch))

    def send(self, actions: np.ndarray) -> None:
        """Actions for the last batch, in its order: each stream gets its envs' share."""
        actions = np.asarray(actions)
        expected = sum(n for _, _, n in self._last)
        if actions.shape != (expected,):
            raise ValueError(f"send() takes one action per env of the last batch: {expected}, got {actions.shape}")
        for stream, start, n in self._last:
            stream.outbox.put(actions[start : start + n].astype(np.int32))
        self._last = []

    def take_disconnected(self) -> np.ndarray:
        """Global ids of the envs whose actor process was lost since the last call, each once; the
        job drops their unfinished unrolls. Their range is free for a new actor from now on."""
        return self._hub.take_lost(in_batch=[stream for stream, _, _ in self._last])

    def fail(self, reason: str) -> None:
        """Before reset() returns: an expected actor can never join; reset() raises `reason`."""
        self._hub.fail(reason)

    def close(self) -> None:
        """End every stream (the actor processes exit) and stop the server."""
        if self._closed:
            return
        self._closed = True
        self._hub.close()
        self._server.stop(self._grace).wait()

    def _batch(self, steps) -> StepBatch:
        self._last, start = [], 0
        for stream, step in steps:
            self._last.append((stream, start, len(step.env_ids)))
            start += len(step.env_ids)
        ids = np.concatenate([stream.first + step.env_ids for stream, step in steps])
        frames = np.concatenate([step.frames for _, step in steps])
        done = np.concatenate([step.done for _, step in steps])
        reward = np.concatenate([step.rewards for _, step in steps])
        return StepBatch(ids, self._stacks.push(ids, frames, done), reward, done)


class _Servicer(pb_grpc.ActorsServicer):
    """One call per actor process: admit it, welcome it after the job's reset, then answer each
    Step with the actions the job sends for it."""

    def __init__(self, hub: Hub, spec: pb.EnvSpec, token: str | None, frame_shape, dtype, spans: bool = False):
        self.hub, self.spec, self.token = hub, spec, token
        self.frame_shape, self.dtype, self.spans = frame_shape, dtype, spans

    def Connect(self, requests, context):  # the rpc's name in actors.proto
        try:
            stream = self._admit(requests, context)
        except Refused as r:  # logged with the peer and why (never a token), counted by kind in the hub
            log.warning("refused an actor process from %s: %s: %s", context.peer(), r.reason, r.details)
            context.abort(STATUS[r.reason], r.details)
        if stream is None:
            return
        if not context.add_callback(lambda: self.hub.lose(stream)):  # called when the call ends, however
            self.hub.lose(stream)
            return
        seed = self.hub.welcome(stream)
        if seed is None:
            return
        yield pb.ServerMessage(
            welcome=pb.Welcome(
                protocol_version=PROTOCOL_VERSION,
                first_env_id=stream.first,
                seed=seed,
                total_envs=self.hub.total,
                spans=self.spans,
            )
        )
        yield from self._serve(stream, requests, context)

    def _admit(self, requests, context) -> Stream | None:
        """The stream of an actor whose token, protocol and env spec are right; None if it left."""
        if self.token and not hmac.compare_digest(token_of(context.invocation_metadata()) or "", self.token):
            self.hub.count("refused_token")
            raise Refused("token", "wrong or missing token (the authorization metadata, from RLBENCH_ACTOR_TOKEN)")
        first = _next(requests)
        if first is None:
            return None
        if first.WhichOneof("kind") != "hello":
            self.hub.count("refused_protocol")
            raise Refused("protocol", f"the first message must be a Hello, got {first.WhichOneof('kind')}")
        hello = first.hello
        if hello.protocol_version != PROTOCOL_VERSION:
            self.hub.count("refused_protocol")
            raise Refused("protocol", f"protocol version: actor {hello.protocol_version}, job {PROTOCOL_VERSION}")
        diff = spec_difference(hello.spec, self.spec)
        if diff:
            self.hub.count("refused_spec")
            raise Refused("spec", f"env spec differs: {diff}")
        if hello.envs < 1:
            self.hub.count("refused_protocol")
            raise Refused("protocol", f"envs={hello.envs}: allowed: >= 1")
        return self.hub.join(
            hello.envs,
            hello.threads,
            hello.hostname,
            hello.pid,
            hello.run_id,
            hello.host_hardware_threads,
            hello.cpu_model,
            hello.task,
        )

    def _serve(self, stream: Stream, requests, context):
        while (msg := _next(requests)) is not None:
            kind = msg.WhichOneof("kind")
            if kind == "report":
                stream.trace.receive(msg.report, time.perf_counter())  # outside the hub's lock: spans to copy
                self.hub.report(stream, msg.report)
                continue
            if kind != "step":
                self._drop(context, stream, f"expected a Step or a Report, got {kind}")
            try:
                step = decode_step(msg.step, stream.envs, self.frame_shape, self.dtype)
            except ValueError as e:
                self._drop(context, stream, str(e))
            stream.bytes_in += step_size(step.env_ids, step.frames.nbytes)  # msg.ByteSize() would re-encode it
            stream.env_steps += len(step.env_ids)
            if not self.hub.push(stream, step):
                return
            actions = stream.outbox.get()
            if actions is None:
                return
            reply = pb.ServerMessage(actions=pb.Actions(actions=actions.tolist()))
            stream.bytes_out += reply.ByteSize()
            yield reply

    def _drop(self, context, stream: Stream, why: str) -> None:
        """End the call of an actor that sent what the protocol does not allow (logged, counted)."""
        log.warning("dropped actor process %s from %s: %s", stream.index, context.peer(), why)
        self.hub.count("refused_message")
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, why)


def _next(requests):
    """The actor's next message, or None when its side ended (half-closed, cancelled, gone)."""
    try:
        return next(requests)
    except StopIteration:
        return None
    except grpc.RpcError:
        return None
