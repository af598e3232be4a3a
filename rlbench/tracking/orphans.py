"""Runs whose process is gone: found when rlbench next starts in the store, and closed.

Every RUNNING run rlbench opens carries its owner (`owner_tags`: host, pid, start time);
`close_orphans` searches the store's RUNNING runs once, closing a gone process's run of this
host KILLED and others FAILED once stale (a parent only when none of its jobs lives). docs/metrics.md.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass

import mlflow
import psutil

log = logging.getLogger(__name__)

HOST, PID, STARTED = "rlbench.owner.host", "rlbench.owner.pid", "rlbench.owner.started"
PARENT_ROLES = ("sweep", "study")


def process_started(pid: int) -> str | None:
    """The start time of process `pid` (unix seconds, as text), or None when there is none."""
    try:
        return f"{psutil.Process(pid).create_time():.2f}"
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


def owner_tags() -> dict[str, str]:
    """The tags naming this process as the owner of the runs it opens."""
    pid = os.getpid()
    return {HOST: socket.gethostname(), PID: str(pid), STARTED: process_started(pid) or ""}


def owner_gone(tags: dict[str, str]) -> str | None:
    """Why the run's owner process is known to be gone (it was of this host), or None when it
    is alive, unknown (no owner tags) or of another host (the heartbeat rule decides)."""
    if tags.get(HOST) != socket.gethostname() or not tags.get(PID, "").isdigit():
        return None
    pid, started = int(tags[PID]), tags.get(STARTED, "")
    now = process_started(pid)
    if now is None:
        return f"its process {pid} on {tags[HOST]} is gone (killed?)"
    if started and now != started:
        return f"its process {pid} on {tags[HOST]} is gone (the pid now belongs to another process)"
    return None


@dataclass
class _Verdict:
    status: str
    reason: str


def _judge(run, now: float, stale_after_s: float) -> _Verdict | None:
    """A job's or a profile's run: KILLED when its owner is gone, FAILED when stale."""
    gone = owner_gone(run.data.tags)
    if gone:
        return _Verdict("KILLED", f"orphaned: {gone}; marked KILLED by the next rlbench start")
    if run.data.tags.get(HOST) == socket.gethostname() and run.data.tags.get(PID):
        return None  # its owner is alive
    last = float(run.data.tags.get("heartbeat", run.info.start_time / 1000))
    if now - last > stale_after_s:
        return _Verdict("FAILED", f"stale: no heartbeat for {now - last:.0f} s (process killed?); marked FAILED")
    return None


def _judge_parent(run, alive_children: bool, now: float, stale_after_s: float) -> _Verdict | None:
    """A sweep's or a study's parent: closed when its owner is gone (or it is stale) and none
    of its jobs is alive."""
    if alive_children:
        return None
    gone = owner_gone(run.data.tags)
    if gone:
        return _Verdict(
            "KILLED", f"orphaned: {gone} and none of its jobs runs; marked KILLED by the next rlbench start"
        )
    if run.data.tags.get(HOST) == socket.gethostname() and run.data.tags.get(PID):
        return None
    children = mlflow.search_runs(
        search_all_experiments=True,
        output_format="list",
        filter_string=f"tags.mlflow.parentRunId = '{run.info.run_id}'",
    )
    last = max([run.info.start_time / 1000] + [float(c.data.tags.get("heartbeat", 0)) for c in children])
    if now - last > stale_after_s:
        return _Verdict(
            "FAILED", f"stale: no heartbeat from its jobs for {now - last:.0f} s (process killed?); marked FAILED"
        )
    return None


def close_orphans(stale_after_s: float) -> dict[str, str]:
    """Close the RUNNING runs of every experiment of the current store whose process is gone
    (docs/metrics.md, "Tags"); returns run id -> the status it got."""
    now, client, closed = time.time(), mlflow.MlflowClient(), {}
    running = mlflow.search_runs(
        search_all_experiments=True, filter_string="attributes.status = 'RUNNING'", output_format="list"
    )
    jobs = [r for r in running if r.data.tags.get("rlbench.role") not in PARENT_ROLES]
    verdicts = {r.info.run_id: _judge(r, now, stale_after_s) for r in jobs}
    alive_under: set[str] = {r.data.tags.get("mlflow.parentRunId") for r in jobs if verdicts[r.info.run_id] is None}
    for run in running:
        if run.data.tags.get("rlbench.role") in PARENT_ROLES:
            verdicts[run.info.run_id] = _judge_parent(run, run.info.run_id in alive_under, now, stale_after_s)
    for run_id, verdict in verdicts.items():
        if verdict is not None:
            client.set_tag(run_id, "end_reason", verdict.reason)
            client.set_terminated(run_id, verdict.status)
            closed[run_id] = verdict.status
    if closed:
        log.warning(
            "closed %d run(s) left RUNNING by a process that is gone: %s",
            len(closed),
            ", ".join(f"{k} {v}" for k, v in closed.items()),
        )
    return closed
