"""The actor process's loop (SEED RL's common/actor.py actor_loop): Hello and Welcome, then the
family's vector env stepped in lock-step (a stack of 1: the job rebuilds the stacks), each
vector step's newest frames sent and the actions that come back applied, until the job ends the
stream; `run_actor` returns the command's last line, or raises a Refusal or a Failure that says
it. The stream is gRPC's asyncio API on the loop's one thread: docs/actors.md."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import time
from typing import NamedTuple

import numpy as np

from rlbench.core.env_families import family
from rlbench.core.errors import Failure, Refusal
from rlbench.core.resources import cpu_model, usable_cpus
from rlbench.envs.spec import EnvSpec, env_spec
from rlbench.remote import actors_pb2 as pb
from rlbench.remote.grpc_core import grpc, pb_grpc
from rlbench.remote.telemetry import ENV_STEP, MAX_SPANS_PER_REPORT, WAIT_ACTIONS, SpanBuffer
from rlbench.remote.wire import (
    CHANNEL_OPTIONS,
    PROTOCOL_VERSION,
    spec_message,
    step_message,
    step_size,
    token_metadata,
)

PROG = "rlbench.actor"  # the lines' prefix (the command's, cli/actor.py)
# The env threads' nice value: a process's gRPC and loop threads must not queue behind its own
# emulators (or, on the job's host, the job's inference and learner behind them): each
# Step's round trip crosses several threads, and on busy cores every wake-up waited for a
# time slice. 5 against 0 and 10: docs/actors.md, "Threads and priorities of actor processes".
ENV_NICE = 5
REFUSALS = (
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
)
ENDED = (grpc.StatusCode.CANCELLED,)  # the job stopped its server with this stream open: it ended


def run_actor(
    address: str,
    env_cfg,
    envs: int,
    threads: int,
    token: str | None = None,
    report_every_s: float = 1.0,
    env_nice: int = ENV_NICE,
    task: str = "",
) -> str:
    """Step `envs` envs of `env_cfg` for the job at `address` (HOST:PORT or unix:PATH) until it
    ends the stream: the last line; the job unreachable or refusing this actor: a Refusal (exit
    2); the job lost mid-run: a Failure (exit 1). `env_nice`: the env threads' nice value (see ENV_NICE). `task`:
    the actor task this process runs as (remote/tasks.py), which its Hello names."""
    spec = env_spec(env_cfg)
    hello = pb.Hello(
        protocol_version=PROTOCOL_VERSION,
        spec=spec_message(env_cfg, spec),
        envs=envs,
        threads=threads,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        host_hardware_threads=len(usable_cpus()),
        cpu_model=cpu_model(),
        task=task,
        run_id=int(np.random.default_rng().integers(0, np.iinfo(np.int64).max)),
    )
    return asyncio.run(
        _session(
            address, env_cfg, spec, pb.ActorMessage(hello=hello), _Pool(envs, threads, env_nice), token, report_every_s
        )
    )


async def _session(address, env_cfg, spec, hello, pool, token, report_every_s) -> str:
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        call = pb_grpc.ActorsStub(channel).Connect(metadata=token_metadata(token))
        try:
            return await _run(address, env_cfg, spec, pool, hello, call, report_every_s)
        finally:
            call.cancel()


class _Pool(NamedTuple):
    """The envs this process steps, its threads and their nice value."""

    envs: int
    threads: int
    nice: int


async def _run(address, env_cfg, spec, pool: _Pool, hello, call, report_every_s) -> str:
    envs = pool.envs
    try:
        await call.write(hello)
        welcome = await call.read()
    except grpc.RpcError as e:
        if e.code() in REFUSALS:
            raise Refusal(f"the job at {address} refused this actor: {e.details()}") from None
        if e.code() in ENDED:
            return f"{PROG}: the job at {address} ended before welcoming this actor"
        raise Refusal(f"cannot reach the job at {address}: {e.code().name} ({e.details()})") from None
    except asyncio.InvalidStateError:  # the call ended, with an OK status, before the Hello went
        welcome = grpc.aio.EOF
    if welcome is grpc.aio.EOF:
        return f"{PROG}: the job at {address} ended before welcoming this actor"
    welcome = welcome.welcome
    ids = f"envs {welcome.first_env_id}..{welcome.first_env_id + envs - 1} of {welcome.total_envs}"
    loop = _Loop(
        newest_frame_env(env_cfg, spec, pool.envs, pool.threads, pool.nice, welcome.seed),
        spec,
        call,
        report_every_s,
        SpanBuffer(MAX_SPANS_PER_REPORT if welcome.spans else 0),
    )
    try:
        await loop.run(welcome.seed)
    except grpc.RpcError as e:
        if e.code() in ENDED:
            return f"{PROG}: the job at {address} ended the stream after {loop.steps} steps ({ids})"
        raise Failure(
            f"lost the job at {address} after {loop.steps} steps ({ids}): {e.code().name} ({e.details()})"
        ) from None
    finally:
        loop.env.close()
    return f"{PROG}: the job at {address} ended the stream after {loop.steps} steps ({ids})"


def newest_frame_env(env_cfg, spec: EnvSpec, envs: int, threads: int, env_nice: int = 0, seed: int = 0):
    """The family's vector env, lock-step, observing the newest frame only where the family's
    schema has a `stack` field (EnvSpec.stack's source); others are sent their newest frame.
    The threads it starts (the family's pool) get `env_nice`; `seed` is its first reset's."""
    names = {f.name for f in dataclasses.fields(env_cfg)}
    if spec.stack > 1 and "stack" in names:
        env_cfg = dataclasses.replace(env_cfg, stack=1)
    before = _thread_ids()
    env = family(env_cfg.kind).make(env_cfg, envs, threads, 0, seed=seed)
    lower_priority(_thread_ids() - before, env_nice)
    return env


def _thread_ids() -> set[int]:
    """This process's threads (Linux: /proc/self/task); empty where that is not readable."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def lower_priority(tids, nice: int) -> None:
    """Raise the nice value of threads `tids` to `nice` (Linux's nice is per thread), leaving
    gRPC's own threads (named grpc*/event_engine*) as they are; best effort: a thread gone or a
    system without per-thread nice keeps its priority."""
    if nice <= 0:
        return
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith(("grpc", "event_engine")):
                    continue
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except OSError:
            continue


class _Loop:
    """Step, send, wait for the actions, step again; timing what the Report carries."""

    def __init__(self, env, spec: EnvSpec, call, report_every_s: float, spans: SpanBuffer | None = None):
        self.env, self.spec, self.call, self.report_every_s = env, spec, call, report_every_s
        self.steps, self.env_step_s, self.wait_s, self.bytes_sent, self.bytes_received = 0, 0.0, 0.0, 0, 0
        self._rtts: list[float] = []
        self.spans = spans or SpanBuffer(0)  # times the operations (env_step, wait_actions); keeps them as spans
        self.started = time.perf_counter()  # the Reports' wall_s counts from here

    async def run(self, seed: int) -> None:
        """Until the job ends the stream (returns) or loses it (grpc.RpcError)."""
        t = time.perf_counter()
        batch = self.env.reset(seed=seed)
        self.env_step_s += self.spans.add(ENV_STEP, t)
        next_report = time.monotonic() + self.report_every_s
        while True:
            if time.monotonic() >= next_report:
                if not await self._send(self._report()):
                    return
                next_report = time.monotonic() + self.report_every_s
            frames = self._newest(batch.obs)
            size = step_size(batch.env_ids, frames.nbytes)  # msg.ByteSize() would encode it once more
            if not await self._send(step_message(batch.env_ids, frames, batch.reward, batch.done), size):
                return
            t = time.perf_counter()
            reply = await self.call.read()
            rtt = self.spans.add(WAIT_ACTIONS, t)
            if reply is grpc.aio.EOF:
                return
            self.wait_s += rtt
            self._rtts.append(rtt)
            self.bytes_received += reply.ByteSize()
            t = time.perf_counter()
            self.env.send(np.asarray(reply.actions.actions, np.int64))
            batch = self.env.recv()
            self.env_step_s += self.spans.add(ENV_STEP, t)
            self.steps += 1

    def _newest(self, obs: np.ndarray) -> np.ndarray:
        return obs if obs.shape[1:] == tuple(self.spec.frame_shape) else obs[:, -1]

    async def _send(self, msg: pb.ActorMessage, size: int | None = None) -> bool:
        """False when the job ended the call (with an OK status) before this message went.
        `size`: its serialized bytes where known (else ByteSize(), which encodes it)."""
        try:
            await self.call.write(msg)
        except asyncio.InvalidStateError:
            return False
        self.bytes_sent += msg.ByteSize() if size is None else size
        return True

    def _report(self) -> pb.ActorMessage:
        ms = np.array(self._rtts or [0.0]) * 1e3
        self._rtts = []
        return pb.ActorMessage(
            report=pb.Report(
                cpu_s=time.process_time(),
                env_step_s=self.env_step_s,
                wait_actions_s=self.wait_s,
                rtt_p50_ms=float(np.percentile(ms, 50)),
                rtt_p99_ms=float(np.percentile(ms, 99)),
                bytes_sent=self.bytes_sent,
                bytes_received=self.bytes_received,
                steps=self.steps,
                wall_s=time.perf_counter() - self.started,
                **self.spans.report_fields(),
            )
        )
