"""The actor processes' telemetry, its pure parts (rlbench/remote/telemetry.py), fast: the
actor's span buffer, the clock offset and the spans shifted onto the job's clock, the
processes' metrics and table, the threads that count in cpu_gpu_ratio (capped per host), the
hosts' list, and the one threads-per-process rule the plan and the job's processes share.
Real processes and jobs: tests/test_actor_procs.py (e2e)."""

from __future__ import annotations

import logging
import subprocess
import types

import pytest

from rlbench.remote import actors_pb2 as pb
from rlbench.remote.hub import Hub, Stream
from rlbench.remote.telemetry import (
    ProcessTrace,
    SpanBuffer,
    counted_threads,
    host_rows,
    hosts_tag,
    process_metrics,
    process_rows,
)


def test_the_actors_span_buffer_times_operations_and_keeps_the_newest_up_to_its_bound(monkeypatch):
    clock = iter([1.5, 2.0, 2.25, 3.0, 3.5, 9.0, 9.5, 10.0])
    monkeypatch.setattr("rlbench.remote.telemetry.time.perf_counter", lambda: next(clock))
    spans = SpanBuffer(limit=2)
    assert spans.add("env_step", 1.0) == 0.5 and spans.add("wait_actions", 1.5) == 0.5
    assert spans.add("env_step", 2.0) == 0.25
    fields = spans.report_fields()  # sent_at: 3.0
    assert fields["sent_at"] == 3.0 and fields["spans_dropped"] == 1
    assert [(s.name, s.start, s.end) for s in fields["spans"]] == [("wait_actions", 1.5, 2.0), ("env_step", 2.0, 2.25)]
    assert spans.add("env_step", 3.25) == 0.25  # a new interval
    assert [s.end for s in spans.report_fields()["spans"]] == [3.5]
    off = SpanBuffer(limit=0)  # the job records no timeline: times only
    assert off.add("env_step", 8.5) == 1.0 and off.report_fields()["spans"] == []


def _report(sent_at: float, spans=(), dropped: int = 0) -> pb.Report:
    return pb.Report(
        sent_at=sent_at, spans=[pb.Span(name=n, start=a, end=b) for n, a, b in spans], spans_dropped=dropped
    )


def test_a_process_on_another_clock_is_shifted_by_its_smallest_report_delay():
    """The actor's clock reads 1000 s behind the job's; its Reports take 5, 2 and 9 ms: the
    offset is 1000.002 s (an estimate: late by the fastest Report's delay)."""
    trace = ProcessTrace()
    assert trace.recorder("actor_proc0", t0=0.0, window_s=10) is None  # no Report yet: no track
    trace.receive(_report(1.0, [("env_step", 0.2, 0.3)]), received_at=1001.005)
    trace.receive(_report(2.0, [("wait_actions", 1.5, 1.6)], dropped=3), received_at=1002.002)
    trace.receive(_report(3.0), received_at=1003.009)
    assert trace.offset == pytest.approx(1000.002)
    rec = trace.recorder("actor_proc0", t0=1000.0, window_s=10)
    spans, dropped = rec.kept(t_end=1003.0)
    assert [(n, round(a - 1000, 6), round(b - 1000, 6)) for n, a, b in spans] == [
        ("env_step", 0.202, 0.302),
        ("wait_actions", 1.502, 1.602),
    ]
    assert dropped == 3  # those the actor did not send
    assert "an estimate" in rec.note and "+1000.002000 s" in rec.note


def test_a_process_trace_keeps_its_first_and_last_spans_within_its_bound():
    trace = ProcessTrace(max_events=2)
    trace.receive(_report(0.0, [("env_step", t, t + 0.5) for t in range(5)]), received_at=0.0)
    assert trace.total == 5 and [s[1] for s in trace._head] == [0, 1] and [s[1] for s in trace._tail] == [3, 4]


def _stream(index, first, envs, threads, host="h", host_threads=0, alive=True, report=None, steps=0, b_in=0, b_out=0):
    s = Stream(
        first,
        envs,
        threads,
        host,
        100 + index,
        7,
        index=index,
        host_threads=host_threads,
        cpu_model=f"cpu of {host}",
        alive=alive,
        report=report,
        env_steps=steps,
        bytes_in=b_in,
        bytes_out=b_out,
    )
    return s


def _measured(wall, env_step, wait, cpu) -> pb.Report:
    return pb.Report(wall_s=wall, env_step_s=env_step, wait_actions_s=wait, cpu_s=cpu, steps=10, rtt_p50_ms=1.0)


def test_each_process_is_a_role_and_the_summed_role_is_time_weighted():
    streams = [
        _stream(0, 0, 2, 1, report=_measured(10.0, 6.0, 3.0, 8.0), steps=100, b_in=4000, b_out=1000),
        _stream(1, 2, 2, 1, report=_measured(30.0, 6.0, 21.0, 12.0), steps=50, b_in=2000, b_out=500),
        _stream(2, 4, 2, 1, steps=0),
    ]  # joined, never reported nor stepped
    m = process_metrics(process_rows(streams))
    assert m["op_frac/actor_procs/env_step"] == pytest.approx(12 / 40)
    assert m["op_frac/actor_procs/wait_actions"] == pytest.approx(24 / 40)
    assert m["op_frac/actor_procs/other"] == pytest.approx(4 / 40) and m["actor_procs_cpu_s"] == 20.0
    assert m["op_frac/actor_proc0/env_step"] == pytest.approx(0.6) and m["op_frac/actor_proc0/other"] == pytest.approx(
        0.1
    )
    assert m["op_frac/actor_proc1/wait_actions"] == pytest.approx(0.7) and m["actor_proc1/cpu_s"] == 12.0
    assert m["actor_proc0/bytes_sent_per_step"] == 40.0 and m["actor_proc1/bytes_received_per_step"] == 10.0
    assert not [k for k in m if "actor_proc2" in k]  # unreported: absent, never 0


def test_the_processes_table_says_who_and_where_with_null_for_what_was_not_reported():
    rows = process_rows(
        [
            _stream(1, 2, 2, 4, host="b", host_threads=8, alive=False),
            _stream(0, 0, 2, 1, report=_measured(10.0, 6.0, 3.0, 8.0), steps=10, b_in=100),
        ]
    )
    assert [r["process"] for r in rows] == ["actor_proc0", "actor_proc1"]
    lost = rows[1]
    assert (lost["host"], lost["pid"], lost["threads"], lost["host_hardware_threads"], lost["connected"]) == (
        "b",
        101,
        4,
        8,
        False,
    )
    assert lost["cpu_s"] is None and lost["frac_env_step"] is None and lost["bytes_sent_per_step"] is None
    assert rows[0]["frac_wait_actions"] == pytest.approx(0.3) and rows[0]["host_hardware_threads"] is None


def test_cpu_gpu_ratios_threads_are_capped_per_host_at_its_hardware_threads():
    a = [_stream(0, 0, 4, 16, host="a", host_threads=8), _stream(1, 4, 4, 16, host="a", host_threads=8)]
    b = [_stream(2, 8, 4, 2, host="b", host_threads=64)]
    assert counted_threads(a + b) == 8 + 2  # host a declared 32 threads on 8
    unsaid = [_stream(0, 0, 4, 3, host="old")]  # a host that did not say its threads: not capped
    assert counted_threads(unsaid) == 3


def test_a_restarted_process_replaces_the_one_it_rejoined_for_and_a_lost_one_still_counts():
    killed = _stream(0, 0, 2, 1, alive=False)
    other = _stream(1, 2, 2, 1)
    again = _stream(2, 0, 2, 1)  # started for the killed one's envs
    assert counted_threads([killed, other, again]) == 2
    assert counted_threads([killed, other]) == 2  # lost, not replaced: its threads stepped its envs until then


def test_the_hosts_list_names_each_hosts_threads_cpu_and_processes():
    streams = [
        _stream(0, 0, 4, 16, host="a", host_threads=8),
        _stream(1, 4, 4, 16, host="a", host_threads=8),
        _stream(2, 8, 4, 2, host="b", host_threads=64),
    ]
    rows = host_rows(streams)
    assert rows == [
        {
            "host": "a",
            "hardware_threads": 8,
            "cpu_model": "cpu of a",
            "processes": 2,
            "tasks": None,
            "pids": "100 101",
            "threads_declared": 32,
            "threads_counted": 8,
        },
        {
            "host": "b",
            "hardware_threads": 64,
            "cpu_model": "cpu of b",
            "processes": 1,
            "tasks": None,
            "pids": "102",
            "threads_declared": 2,
            "threads_counted": 2,
        },
    ]
    assert hosts_tag(rows) == (
        "a: 8 HW threads, cpu of a, 2 processes, 8 of 32 threads counted; "
        "b: 64 HW threads, cpu of b, 1 process, 2 of 2 threads counted"
    )
    many = host_rows([_stream(i, i, 1, 1, host=f"host-{i:04d}-" + "x" * 60) for i in range(200)])
    tag = hosts_tag(many)
    assert len(tag) < 4100 and tag.endswith("more hosts (actors/hosts.json)")


def test_the_hub_numbers_processes_in_join_order_and_logs_joins_and_losses(caplog):
    hub = Hub(total=4, join_timeout_s=0, idle_timeout_s=0)
    with caplog.at_level(logging.INFO, logger="rlbench.remote.hub"):
        a = hub.join(2, 1, "h", 1, 11, host_threads=8, cpu_model="Xeon")
        b = hub.join(2, 1, "h", 2, 12)
        hub.lose(a)
    assert (a.index, b.index, a.host_threads, a.cpu_model) == (0, 1, 8, "Xeon")
    assert [r.getMessage() for r in caplog.records] == [
        "actor process 0 joined: 2 envs from h (pid 1) at ids 0..1",
        "actor process 1 joined: 2 envs from h (pid 2) at ids 2..3",
        "actor process 0 lost: 2 envs from h (pid 1) at ids 0..1",
    ]


def test_the_plan_counts_the_threads_the_jobs_processes_are_started_with(compose_cfg, monkeypatch, tmp_path):
    """LocalActors starts every process with the family's whole pool, pinned with --cpus to the
    CPUs an in-process job pins its actors to where actor_threads is explicit; envs_of counts the
    hardware threads those pools share (local_actor_threads), not procs x pool."""
    from rlbench.core.resources import usable_cpus
    from rlbench.prepare.plan import envs_of, local_actor_threads
    from rlbench.prepare.validate import validate
    from rlbench.remote import job_actors as job

    started = []

    class Proc:
        pid = 1

        def __init__(self, cmd, **kw):
            started.append(cmd)

        def wait(self, timeout=None):
            return 0

    class Remote:
        address = "unix:nowhere"

        def fail(self, reason):
            pass

    monkeypatch.setattr(
        job,
        "subprocess",
        types.SimpleNamespace(  # the job's module only: Popen records the command
            Popen=Proc, STDOUT=subprocess.STDOUT, DEVNULL=subprocess.DEVNULL, TimeoutExpired=subprocess.TimeoutExpired
        ),
    )
    cores = len(usable_cpus())
    for threads, procs in ((None, 3), (5, 2), (1, 3)):
        conf = validate(
            compose_cfg(
                [
                    "env=pong",
                    "actors=12",
                    "eval_envs=0",
                    f"actor_procs={procs}",
                    f"actor_threads={threads if threads else 'null'}",
                ]
            ),
            host=False,
        )
        planned = envs_of(conf)
        started.clear()
        job.LocalActors(Remote(), tmp_path, conf, 12, pin=0 if threads else -1).stop(grace_s=0)
        pool = threads or cores
        assert [int(cmd[cmd.index("--threads") + 1]) for cmd in started] == [pool] * procs
        pins = [cmd[cmd.index("--cpus") + 1] if "--cpus" in cmd else None for cmd in started]
        assert pins == [",".join(map(str, range(pool))) if threads else None] * procs, (threads, pins)
        assert planned.actor_threads == local_actor_threads(pool, procs, pool) == pool


def test_with_actor_processes_the_ratio_waits_for_those_that_joined(compose_cfg):
    from rlbench.prepare.plan import plan_job
    from rlbench.prepare.validate import validate

    inproc = plan_job(validate(compose_cfg(["env=cartpole", "actors=4", "device=cpu"]), host=False))
    assert "cpu_gpu_ratio" in inproc.grant_metrics()
    procs = plan_job(validate(compose_cfg(["env=cartpole", "actors=4", "device=cpu", "actor_procs=2"]), host=False))
    assert "cpu_gpu_ratio" not in procs.grant_metrics() and {"sm_granted", "sm_total"} <= set(procs.grant_metrics())
    granted = procs.grant_metrics(3)
    assert granted["cpu_gpu_ratio"] == 3 / granted["sm_granted"]


def test_a_hosts_actor_tasks_are_listed_by_index_whatever_order_they_joined_in():
    streams = [_stream(i, i, 1, 1, host="vm", host_threads=2) for i in range(3)]
    for s, task in zip(streams, ("10", "2", "0"), strict=True):  # joined in that order
        s.task = task
    rows = host_rows(streams)
    assert rows[0]["tasks"] == "0 2 10"
    assert "3 processes (actor tasks 0, 2, 10)" in hosts_tag(rows)
