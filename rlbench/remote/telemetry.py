"""The actor processes' telemetry: what each one measures and ships in its Reports, and what the
job makes of it. Actor side: `SpanBuffer`, its loop's spans until the next Report, bounded. Job
side, pure over the hub's streams: `ProcessTrace` (a process's spans on the job's clock),
`process_rows`, `process_metrics`, `host_rows` and `counted_threads` (those in cpu_gpu_ratio).
Clock alignment: docs/timeline.md; the metrics and tables: docs/actors.md and docs/metrics.md.
"""

from __future__ import annotations

import collections
import threading
import time

from rlbench.core.metrics import OPS, OTHER, PROCS_ROLE, op_frac, proc_role
from rlbench.remote import actors_pb2 as pb
from rlbench.telemetry.trace import MAX_EVENTS, SpanRecorder

ENV_STEP, WAIT_ACTIONS = OPS[PROCS_ROLE]  # the actor loop's operations
MAX_SPANS_PER_REPORT = 20_000  # per Report (about a second): 20,000 x ~30 bytes at most
TAG_CHARS = 4000  # the actor_hosts tag, cut to stay within MLflow's tag length


class SpanBuffer:
    """The actor loop's operations since the last Report: `add` ends one (returns its seconds);
    with `limit` 0 nothing is kept (the job records no timeline), else the newest `limit`."""

    def __init__(self, limit: int = MAX_SPANS_PER_REPORT):
        self._spans: collections.deque | None = collections.deque(maxlen=limit) if limit else None
        self._count = 0

    def add(self, name: str, start: float) -> float:
        end = time.perf_counter()
        if self._spans is not None:
            self._spans.append((name, start, end))
            self._count += 1
        return end - start

    def report_fields(self) -> dict:
        """The Report's clock stamp and the spans since the last call (and how many were dropped)."""
        spans, dropped = [], 0
        if self._spans:
            spans = [pb.Span(name=n, start=a, end=b) for n, a, b in self._spans]
            dropped = self._count - len(spans)
            self._spans.clear()
            self._count = 0
        return {"sent_at": time.perf_counter(), "spans": spans, "spans_dropped": dropped}


class ProcessTrace:
    """One actor process's spans as its Reports brought them, on its clock, bounded as the job's
    own tracks are (the first and the last MAX_EVENTS), and its clock offset's estimate (the
    module doc). Written by the stream's thread, read by the job's: one lock."""

    def __init__(self, max_events: int = MAX_EVENTS):
        self._lock = threading.Lock()
        self._head: list[tuple[str, float, float]] = []
        self._tail: collections.deque = collections.deque(maxlen=max_events)
        self._max = max_events
        self.total = 0  # spans the process made (those it dropped included)
        self.offset: float | None = None  # job clock - process clock, an estimate

    def receive(self, report, received_at: float) -> None:
        """A Report that arrived at `received_at` (the job's perf_counter)."""
        delay = received_at - report.sent_at
        spans = [(s.name, s.start, s.end) for s in report.spans]
        with self._lock:
            self.offset = delay if self.offset is None else min(self.offset, delay)
            self.total += len(spans) + report.spans_dropped
            room = self._max - len(self._head)
            self._head += spans[:room]
            self._tail.extend(spans[room:])

    def recorder(self, track: str, t0: float, window_s: float) -> SpanRecorder | None:
        """The spans on the job's clock as a track of its timeline (rlbench/telemetry/trace.py:
        its window and bounds applied again); None before any Report."""
        with self._lock:
            spans, total, offset = self._head + list(self._tail), self.total, self.offset
        if offset is None:
            return None
        rec = SpanRecorder(track, t0, window_s)
        for name, a, b in spans:
            rec.add(name, a + offset, b + offset)
        rec.total = total  # those the process dropped or that fell between the bounds count as dropped
        rec.note = (
            f"clock offset {offset:+.6f} s, an estimate (the smallest Report receive - send time): "
            f"spans late by at most one Report's one-way delay"
        )
        return rec


def fractions(env_step_s: float, wait_s: float, wall_s: float) -> dict[str, float]:
    """Shares of `wall_s` in each of the loop's operations and `other` (the rest: building and
    sending messages, the Reports)."""
    out = {ENV_STEP: env_step_s / wall_s, WAIT_ACTIONS: wait_s / wall_s}
    out[OTHER] = max(1.0 - out[ENV_STEP] - out[WAIT_ACTIONS], 0.0)
    return out


def process_rows(streams) -> list[dict]:
    """One row per actor process that joined (lost ones too), by join order: who and where it
    is, what it held, its last Report (None where it sent none) and the job's byte counts."""
    rows = []
    for s in sorted(streams, key=lambda s: s.index):
        r = s.report if s.report is not None and s.report.wall_s > 0 else None
        row = {
            "process": proc_role(s.index),
            "host": s.host,
            "task": s.task or None,
            "pid": s.pid,
            "run_id": str(s.run_id),
            "first_env_id": s.first,
            "envs": s.envs,
            "threads": s.threads,
            "host_hardware_threads": s.host_threads or None,
            "cpu_model": s.cpu_model or None,
            "connected": s.alive,
            "env_steps": s.env_steps,
            "bytes_sent_per_step": s.bytes_in / s.env_steps if s.env_steps else None,
            "bytes_received_per_step": s.bytes_out / s.env_steps if s.env_steps else None,
        }
        measured = (
            {
                "cpu_s": r.cpu_s,
                "wall_s": r.wall_s,
                "env_step_s": r.env_step_s,
                "wait_actions_s": r.wait_actions_s,
                "vector_steps": r.steps,
                "rtt_p50_ms": r.rtt_p50_ms,
                "rtt_p99_ms": r.rtt_p99_ms,
            }
            if r
            else {}
        )
        for key in ("cpu_s", "wall_s", "env_step_s", "wait_actions_s", "vector_steps", "rtt_p50_ms", "rtt_p99_ms"):
            row[key] = measured.get(key)
        fracs = fractions(r.env_step_s, r.wait_actions_s, r.wall_s) if r else {}
        row |= {f"frac_{op}": fracs.get(op) for op in (*OPS[PROCS_ROLE], OTHER)}
        rows.append(row)
    return rows


def process_metrics(rows: list[dict]) -> dict[str, float]:
    """The `actor_procs` role's op fractions (time-weighted over the processes that reported:
    summed seconds over summed wall seconds) and CPU seconds (summed), and per process
    `op_frac/actor_proc<i>/<op>`, `actor_proc<i>/cpu_s`, `actor_proc<i>/bytes_sent_per_step`,
    `actor_proc<i>/bytes_received_per_step`; a value no process reported is left out."""
    m: dict[str, float] = {}
    reported = [r for r in rows if r["wall_s"]]
    if reported:
        total = fractions(
            sum(r["env_step_s"] for r in reported),
            sum(r["wait_actions_s"] for r in reported),
            sum(r["wall_s"] for r in reported),
        )
        m |= {op_frac(PROCS_ROLE, op): v for op, v in total.items()}
        m["actor_procs_cpu_s"] = float(sum(r["cpu_s"] for r in reported))
    for r in rows:
        role = r["process"]
        if r["wall_s"]:
            m |= {op_frac(role, op): r[f"frac_{op}"] for op in (*OPS[PROCS_ROLE], OTHER)}
            m[f"{role}/cpu_s"] = float(r["cpu_s"])
        for key in ("bytes_sent_per_step", "bytes_received_per_step"):
            if r[key] is not None:
                m[f"{role}/{key}"] = float(r[key])
    return m


def latest_holders(streams) -> list:
    """The processes that last held each of the job's envs: a process whose every env a later
    one took (a restarted process rejoining its range) does not count; one lost and not
    replaced does (its threads stepped its envs until it left)."""
    taken: set[int] = set()
    kept = []
    for s in sorted(streams, key=lambda s: -s.index):
        ids = set(range(s.first, s.first + s.envs))
        if ids - taken:
            kept.append(s)
        taken |= ids
    return sorted(kept, key=lambda s: s.index)


def _by_host(streams) -> dict[str, list]:
    hosts: dict[str, list] = {}
    for s in sorted(streams, key=lambda s: s.index):
        hosts.setdefault(s.host, []).append(s)
    return hosts


def _capped(procs) -> int:
    """Threads the processes declared, capped at their host's hardware threads where it said them."""
    declared = sum(s.threads for s in procs)
    cap = max((s.host_threads for s in procs), default=0)
    return min(declared, cap) if cap else declared


def counted_threads(streams) -> int:
    """cpu_gpu_ratio's numerator: per host, the threads its processes that last held the envs
    declared (latest_holders), capped at that host's hardware threads; summed over hosts."""
    return sum(_capped(procs) for procs in _by_host(latest_holders(streams)).values())


def host_rows(streams) -> list[dict]:
    """One row per actor host: its hardware threads and CPU model (their Hellos'), the processes
    that joined from it, the threads they declared and those counted (counted_threads)."""
    holders = {id(s) for s in latest_holders(streams)}
    rows = []
    for host, procs in _by_host(streams).items():
        counted = [s for s in procs if id(s) in holders]
        rows.append(
            {
                "host": host,
                "hardware_threads": max(s.host_threads for s in procs) or None,
                "cpu_model": next((s.cpu_model for s in procs if s.cpu_model), None),
                "processes": len(procs),
                "tasks": " ".join(sorted((s.task for s in procs if s.task), key=_task_order)) or None,
                "pids": " ".join(str(s.pid) for s in procs),
                "threads_declared": sum(s.threads for s in counted),
                "threads_counted": _capped(counted),
            }
        )
    return rows


def _task_order(task: str) -> tuple:
    """Actor tasks by their index (they join in any order): "2" before "10"."""
    return (0, int(task), "") if task.isdigit() else (1, 0, task)


def hosts_tag(rows: list[dict]) -> str:
    """The actor hosts in one line (the run's `actor_hosts` tag), cut to TAG_CHARS."""
    parts = [
        f"{h['host']}: {h['hardware_threads'] or '?'} HW threads, {h['cpu_model'] or '?'}, {_processes(h)}, "
        f"{h['threads_counted']} of {h['threads_declared']} threads counted"
        for h in rows
    ]
    text = "; ".join(parts)
    if len(text) <= TAG_CHARS:
        return text
    cut = text[:TAG_CHARS].rsplit("; ", 1)[0]
    return f"{cut}; ... {len(parts) - cut.count('; ') - 1} more hosts (actors/hosts.json)"


def _processes(host: dict) -> str:
    """`2 processes (actor tasks 0, 1)`: a host's processes and the actor tasks they run as."""
    text = f"{host['processes']} process{'es' if host['processes'] != 1 else ''}"
    return text + (f" (actor tasks {host['tasks'].replace(' ', ', ')})" if host.get("tasks") else "")


def as_columns(rows: list[dict]) -> dict[str, list]:
    """Rows as {column: values}, the form a table artifact takes (MLflow's log_table)."""
    return {k: [r[k] for r in rows] for k in (rows[0] if rows else {})}
