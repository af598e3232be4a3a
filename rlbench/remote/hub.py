"""What the gRPC threads (one per actor stream) and the job's thread share, behind one
condition owned here: the streams and their global id ranges, the Steps waiting for central
inference, the streams lost, the job's seed. A stream's thread calls `join`, `welcome` and
`push`, then waits on its outbox; the job's thread takes Steps (`take_first`, `take_ready`)
and the lost ids (`take_lost`). docs/actors.md.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from rlbench.remote.slots import EnvSlots
from rlbench.remote.telemetry import ProcessTrace
from rlbench.remote.wire import Step

log = logging.getLogger(__name__)


class RemoteError(RuntimeError):
    """The remote actors cannot go on (nobody joined in time, every actor gone, closed)."""


class Refused(Exception):
    """An actor refused at admission: `reason` (token, protocol, spec, full, closing) and the
    details sent back to it."""

    def __init__(self, reason: str, details: str):
        super().__init__(details)
        self.reason, self.details = reason, details


@dataclass(eq=False)
class Stream:
    """One actor process's stream: its envs are global ids first .. first + envs - 1."""

    first: int
    envs: int
    threads: int
    host: str
    pid: int
    run_id: int
    outbox: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)  # actions [envs] int32, or None: end
    alive: bool = True
    seen: bool = False  # the job has been given a batch with its envs
    generation: int = 0  # 0: joined before the job's reset; k: the k-th join after it
    report: object | None = None  # its latest Report message
    bytes_in: int = 0  # serialized message bytes; written by the stream's thread only
    bytes_out: int = 0
    env_steps: int = 0
    index: int = 0  # its place among the streams that joined the job (actor_proc<index>)
    host_threads: int = 0  # its host's hardware threads (0: not said)
    cpu_model: str = ""
    task: str = ""  # the actor task it runs as (actor_hosts: "0", "1", ...); empty for other processes
    trace: ProcessTrace = field(default_factory=ProcessTrace)  # its spans, from its Reports

    @property
    def ids(self) -> np.ndarray:
        return np.arange(self.first, self.first + self.envs)

    def describe(self) -> str:
        task = f"actor task {self.task} on " if self.task else ""
        return f"{self.envs} env{'s' if self.envs != 1 else ''} from {task}{self.host} (pid {self.pid})"


class Hub:
    def __init__(self, total: int, join_timeout_s: float, idle_timeout_s: float):
        self.total, self.join_timeout_s, self.idle_timeout_s = total, join_timeout_s, idle_timeout_s
        self._cond = threading.Condition()
        self._slots = EnvSlots(total)
        self._streams: list[Stream] = []  # joined and alive
        self._every: list[Stream] = []  # every stream that joined (its byte counts stay)
        self._ready: collections.deque[tuple[Stream, Step]] = collections.deque()
        self._ready_envs = 0
        self._lost: list[Stream] = []  # lost after the job saw their envs, not yet taken
        self._freed: set[int] = set()  # ids of lost streams whose range was freed before the job took them
        self._seed: int | None = None
        self._started = False
        self._closing = False
        self._failure: str | None = None  # why the actors can never join (fail())
        self._idle_since = time.monotonic()
        self.counts: collections.Counter = collections.Counter()

    # -- the streams' threads --

    def count(self, what: str) -> None:
        with self._cond:
            self.counts[what] += 1

    def join(
        self,
        envs: int,
        threads: int,
        host: str,
        pid: int,
        run_id: int,
        host_threads: int = 0,
        cpu_model: str = "",
        task: str = "",
    ) -> Stream:
        """A stream holding a free range of `envs` ids; a range lost mid-run is free again once
        the job has taken it (take_lost), so this waits up to the join timeout for one that will
        be. Raises Refused when none can be had."""
        with self._cond:
            deadline, waited = time.monotonic() + self.join_timeout_s, False
            while (first := self._slots.take(envs)) is None:
                if self._closing:
                    raise Refused("closing", "the job is closing")
                unfreed = [s for s in self._lost if id(s) not in self._freed]  # freed when the job takes them
                if unfreed and not self._streams:  # every actor gone: the job waits for steps, cannot take the loss
                    self._free_lost()
                    continue
                coming = sum(s.envs for s in unfreed)
                left = deadline - time.monotonic()
                if envs > self._slots.free + coming or left <= 0:
                    self.counts["refused_full"] += 1
                    raise Refused(
                        "full",
                        f"this actor asks for {envs} envs; the job has {self.total}, "
                        f"{self._slots.free} free ({self._holders()})",
                    )
                if not waited:  # logged once per actor: a rejoin waits for the job to take the loss
                    log.info(
                        "an actor process from %s (pid %d) waits for %d envs: %d free, %d lost ones still to be "
                        "taken by the job",
                        host,
                        pid,
                        envs,
                        self._slots.free,
                        coming,
                    )
                    waited = True
                self._cond.wait(left)
            generation = 0
            if self._started:
                self.counts["rejoins"] += 1
                generation = self.counts["rejoins"]
            stream = Stream(
                first,
                envs,
                threads,
                host,
                pid,
                run_id,
                generation=generation,
                index=len(self._every),
                host_threads=host_threads,
                cpu_model=cpu_model,
                task=task,
            )
            self._streams.append(stream)
            self._every.append(stream)
            self.counts["joins"] += 1
            self._cond.notify_all()
        log.info(
            "actor process %d joined: %s at ids %d..%d%s",
            stream.index,
            stream.describe(),
            first,
            first + envs - 1,
            f" (rejoin {generation})" if generation else "",
        )
        return stream

    def welcome(self, stream: Stream) -> int | None:
        """The reset seed of the stream's first env, once the job has reset (seeds as
        in-process: global env i gets seed + i; a stream joining later gets fresh ones);
        None when the job closes or the stream is lost first."""
        with self._cond:
            self._cond.wait_for(lambda: self._seed is not None or self._closing or not stream.alive)
            if self._closing or not stream.alive:
                return None
            return self._seed + stream.first + self.total * stream.generation

    def push(self, stream: Stream, step: Step) -> bool:
        """Queue a stream's Step for central inference; False when the stream must end."""
        with self._cond:
            if self._closing or not stream.alive:
                return False
            self._ready.append((stream, step))
            self._ready_envs += len(step.env_ids)
            self._cond.notify_all()
            return True

    def report(self, stream: Stream, report) -> None:
        with self._cond:
            stream.report = report

    def lose(self, stream: Stream) -> None:
        """The stream ended (its actor gone, or the job closing): its envs leave the batching;
        ids the job has seen are kept for take_lost, the others are free at once."""
        with self._cond:
            if not stream.alive:
                return
            stream.alive = False
            stream.outbox.put(None)
            self._streams.remove(stream)
            kept = [(s, step) for s, step in self._ready if s is not stream]
            self._ready = collections.deque(kept)
            self._ready_envs = sum(len(step.env_ids) for _, step in kept)
            if not self._streams:
                self._idle_since = time.monotonic()
            if self._closing:
                return
            self.counts["disconnects"] += 1
            if stream.seen:
                self._lost.append(stream)
            else:
                self._slots.release(stream.first, stream.envs)
            self._cond.notify_all()
        log.warning(
            "actor process %d lost: %s at ids %d..%d",
            stream.index,
            stream.describe(),
            stream.first,
            stream.first + stream.envs - 1,
        )

    # -- the job's thread --

    def take_first(self, seed: int) -> list[tuple[Stream, Step]]:
        """Every env's first Step, once actors holding all envs have joined and reset; raises
        RemoteError naming who joined and how many envs are missing after the join timeout."""
        with self._cond:
            if self._seed is not None:
                raise RemoteError("the remote envs were reset already; reset() is called once")
            self._seed = seed
            self._cond.notify_all()
            ok = self._cond.wait_for(
                lambda: self._closing or self._failure is not None or self._ready_envs == self.total,
                self.join_timeout_s,
            )
            if self._failure is not None:
                raise RemoteError(self._failure)
            if self._closing:
                raise RemoteError("the remote envs were closed while waiting for actors")
            if not ok:
                raise RemoteError(self._missing())
            self._started = True
            return self._pop(self.total)

    def take_ready(self, batch: int) -> list[tuple[Stream, Step]]:
        """The first ready Steps, whole, totalling at least min(batch, envs connected) envs;
        raises RemoteError when no actor has been connected for the idle timeout."""
        with self._cond:
            while True:
                if self._closing:
                    raise RemoteError("the remote envs are closed")
                connected = sum(s.envs for s in self._streams)
                if connected and self._ready_envs >= min(batch, connected):
                    return self._pop(min(batch, connected))
                if connected:
                    self._cond.wait()
                    continue
                left = self._idle_since + self.idle_timeout_s - time.monotonic()
                if left <= 0:
                    raise RemoteError(
                        f"no actor process has been connected for {self.idle_timeout_s:g} s "
                        f"({self.counts['disconnects']} disconnected); the job cannot step"
                    )
                self._cond.wait(left)

    def take_lost(self, in_batch=()) -> np.ndarray:
        """Global ids of the envs lost since the last call (each reported once); their ranges
        are free for a new actor from now on. A stream in `in_batch` (whose Step the job holds
        in the batch it just received) is reported at the next call: its step goes through
        inference and unroll assembly first, and is dropped with the rest of its unfinished
        unroll, never starting the fresh one."""
        with self._cond:
            held = {id(s) for s in in_batch}
            lost = [s for s in self._lost if id(s) not in held]
            self._lost = [s for s in self._lost if id(s) in held]
            for s in lost:
                if id(s) not in self._freed:
                    self._slots.release(s.first, s.envs)
                self._freed.discard(id(s))
            if lost:
                self._cond.notify_all()
            return np.concatenate([s.ids for s in lost]) if lost else np.zeros(0, np.int64)

    def _free_lost(self) -> None:
        """Every actor gone (none connected): free the lost ranges before the job takes them, so
        that a restarted actor can join; the job blocks in take_ready until it does, and learns of
        the loss right after the recv that returns the new actor's first step (in_batch defers
        only the lost streams' own held steps), so it forgets the lost envs' unrolls before it
        infers that step. Called with the condition held."""
        for s in self._lost:
            if id(s) not in self._freed:
                self._slots.release(s.first, s.envs)
                self._freed.add(id(s))
        self._cond.notify_all()

    def fail(self, reason: str) -> None:
        """Before the start: the expected actors can never all join (a process the job started
        exited); reset() raises `reason` now instead of after the join timeout. Ignored later:
        an actor lost mid-run is a disconnect."""
        with self._cond:
            if not self._started and self._failure is None:
                self._failure = reason
                self._cond.notify_all()

    def close(self) -> None:
        """Every stream's thread ends its stream; waiting joins and welcomes return."""
        with self._cond:
            self._closing = True
            for s in self._streams:
                s.outbox.put(None)
            self._cond.notify_all()

    def streams(self) -> list[Stream]:
        """The streams joined and alive, by first id."""
        with self._cond:
            return sorted(self._streams, key=lambda s: s.first)

    def every_stream(self) -> list[Stream]:
        with self._cond:
            return list(self._every)

    def _pop(self, want: int) -> list[tuple[Stream, Step]]:
        out, n = [], 0
        while n < want:
            stream, step = self._ready.popleft()
            stream.seen = True
            out.append((stream, step))
            n += len(step.env_ids)
        self._ready_envs -= n
        return out

    def _holders(self) -> str:
        return (
            ", ".join(f"{s.describe()} at ids {s.first}..{s.first + s.envs - 1}" for s in self._streams)
            or "none joined"
        )

    def _missing(self) -> str:
        joined = sum(s.envs for s in self._streams)
        refused = ", ".join(
            f"{k.removeprefix('refused_')} {v}" for k, v in sorted(self.counts.items()) if k.startswith("refused_")
        )
        return (
            f"{joined} of {self.total} envs joined within {self.join_timeout_s:g} s "
            f"({', '.join(s.describe() for s in self._streams) or 'no actor process'}); "
            f"{self.total - joined} missing"
            + (f"; refused: {refused}" if refused else "")
            + (f"; {joined - self._ready_envs} joined but sent no first step" if joined > self._ready_envs else "")
        )
