"""The wire's pure half: the env spec an actor and a job compare, Step messages to arrays and
back, the token's metadata and what a bind address allows. No gRPC calls here. docs/actors.md."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from rlbench.envs.spec import EnvSpec
from rlbench.remote import actors_pb2 as pb

PROTOCOL_VERSION = 1
TOKEN_KEY = "authorization"  # gRPC metadata key (lower case, as gRPC requires)
# Messages may be large (an actor of 1,000 Atari envs sends 7 MB per Step): no gRPC size cap,
# and no SO_REUSEPORT, so that a port in use is refused instead of shared with another server.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
SERVER_OPTIONS = [*CHANNEL_OPTIONS, ("grpc.so_reuseport", 0)]


def spec_message(env_cfg, spec: EnvSpec) -> pb.EnvSpec:
    """The spec a job with env config `env_cfg` (a family's Schema) and probed `spec` steps."""
    settings = sorted(f"{k}={v}" for k, v in dataclasses.asdict(env_cfg).items())
    return pb.EnvSpec(
        env_id=str(env_cfg.id),
        family=str(env_cfg.kind),
        frameskip=int(env_cfg.frameskip),
        num_actions=int(spec.num_actions),
        frame_shape=list(spec.frame_shape),
        frame_dtype=np.dtype(spec.obs_dtype).name,
        stack=int(spec.stack),
        settings=settings,
    )


def spec_difference(actor: pb.EnvSpec, job: pb.EnvSpec) -> str | None:
    """None when the specs agree, else every field that differs with both sides' values."""
    diffs = []
    for field in ("env_id", "family", "frameskip", "num_actions", "frame_shape", "frame_dtype", "stack"):
        a, j = getattr(actor, field), getattr(job, field)
        if field == "frame_shape":
            a, j = tuple(a), tuple(j)
        if a != j:
            diffs.append(f"{field}: actor {a}, job {j}")
    mine, theirs = _settings(actor), _settings(job)
    for key in sorted(mine.keys() | theirs.keys()):
        if mine.get(key) != theirs.get(key):
            diffs.append(f"env.{key}: actor {mine.get(key, '(none)')}, job {theirs.get(key, '(none)')}")
    return "; ".join(diffs) or None


def _settings(spec: pb.EnvSpec) -> dict[str, str]:
    return dict(s.partition("=")[::2] for s in spec.settings)


def step_message(env_ids: np.ndarray, frames: np.ndarray, rewards: np.ndarray, done: np.ndarray) -> pb.ActorMessage:
    """An ActorMessage holding a Step, its fields set in place: ActorMessage(step=Step(...))
    would copy the Step by serializing and parsing it, frames and all, once per message."""
    msg = pb.ActorMessage()
    step = msg.step
    step.env_ids.extend(np.asarray(env_ids, np.int32).tolist())
    step.frames = np.ascontiguousarray(frames).tobytes()
    step.rewards.extend(np.asarray(rewards, np.float32).tolist())
    step.done.extend(np.asarray(done, bool).tolist())
    return msg


_VARINT_LIMITS = np.array([1 << 7, 1 << 14, 1 << 21, 1 << 28], np.int64)  # the first value needing 2, 3, 4, 5 bytes


def varint_size(n: int) -> int:
    """Bytes of `n` as a protobuf varint (a negative int32 is sign-extended to 10 bytes)."""
    return 10 if n < 0 else max(1, (int(n).bit_length() + 6) // 7)


def step_size(env_ids: np.ndarray, frame_bytes: int) -> int:
    """The serialized size of an ActorMessage holding a Step of these env ids and `frame_bytes`
    bytes of frames (4 bytes of reward and 1 of done per env, packed, as actors.proto says),
    equal to its ByteSize() without encoding it: upb's ByteSize() serializes the whole
    message, a copy of every frame, on each side per message (tests pin the equality)."""
    ids = np.asarray(env_ids, np.int64)
    k, size = len(ids), 0
    if k:  # a varint of 1..5 bytes per id >= 0 (by the limits it reaches), 10 per negative one
        ids_len = k + int(np.searchsorted(_VARINT_LIMITS, ids, side="right").sum()) + 9 * int((ids < 0).sum())
        size += 1 + varint_size(ids_len) + ids_len
        size += 1 + varint_size(4 * k) + 4 * k
        size += 1 + varint_size(k) + k
    if frame_bytes:
        size += 1 + varint_size(frame_bytes) + frame_bytes
    return 1 + varint_size(size) + size


class Step(NamedTuple):
    """A decoded Step: local env ids [k], newest frames [k, *frame], rewards [k], done [k]."""

    env_ids: np.ndarray
    frames: np.ndarray
    rewards: np.ndarray
    done: np.ndarray


def decode_step(step: pb.Step, envs: int, frame_shape: tuple[int, ...], dtype: np.dtype) -> Step:
    """The arrays of `step` from an actor of `envs` envs; ValueError naming what is malformed.
    Paid per message by the job: a lock-step Step (every env, ids 0..envs-1 in order, as
    rlbench's actor sends) is checked by one comparison; any other order by the full rule."""
    k = len(step.env_ids)
    ids = np.fromiter(step.env_ids, np.int64, k)
    if k == 0 or k != len(step.rewards) or k != len(step.done):
        raise ValueError(f"a Step with {k} env ids, {len(step.rewards)} rewards, {len(step.done)} done flags")
    in_order = k == envs and ids[0] == 0 and ids[-1] == envs - 1 and (k < 3 or bool((ids[1:] > ids[:-1]).all()))
    if not in_order and (ids.min() < 0 or ids.max() >= envs or len(np.unique(ids)) != k):
        raise ValueError(f"a Step's env ids must be distinct in 0..{envs - 1}, got {ids.tolist()[:8]}")
    expected = k * math.prod(frame_shape) * dtype.itemsize
    data = step.frames  # each read of a bytes field copies it out of the message: once
    if len(data) != expected:
        raise ValueError(f"a Step of {k} frames {frame_shape} {dtype.name} has {len(data)} bytes, not {expected}")
    frames = np.frombuffer(data, dtype).reshape(k, *frame_shape)
    return Step(ids, frames, np.fromiter(step.rewards, np.float32, k), np.fromiter(step.done, bool, k))


def token_metadata(token: str | None) -> list[tuple[str, str]]:
    return [(TOKEN_KEY, f"Bearer {token}")] if token else []


def token_of(metadata) -> str | None:
    """The token a call's invocation metadata carries, or None."""
    for key, value in metadata:
        if key == TOKEN_KEY and value.startswith("Bearer "):
            return value[len("Bearer ") :]
    return None
