"""The actor protocol's cost on this host: the real actor process against the real server
(RemoteEnvs) over a unix socket, each Step answered at once with fixed actions, so only the
transport is timed. `rpc_cost` measures it per message size, `fit_rpc` fits fixed + per env.
The actor's env threads are told apart by their nice value. docs/predict.md, "The profile".
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rlbench.envs.spec import env_spec
from rlbench.predict.measure import fit_cost_line
from rlbench.remote.job_actors import env_overrides

ROW_KEYS = (
    "frames",
    "messages",
    "actor_cpu_s",
    "server_cpu_s",
    "bytes_up",
    "bytes_down",
    "rtt_p50_ms",
    "start_s",
    "reason",
)
FIT_KEYS = ("actor_cpu_s", "server_cpu_s", "bytes_up", "bytes_down")


def rpc_cost(env_conf, frames: list[int], seconds: float = 1.5, timeout_s: float = 60.0) -> list[dict]:
    """[{frames, messages, actor_cpu_s, server_cpu_s, bytes_up, bytes_down, rtt_p50_ms,
    start_s, reason}]: per message at each size (docs/predict.md, rpc.json); values null with the
    `reason` where they could not be measured."""
    from rlbench.remote.server import RemoteEnvs  # lazy: keeps grpc off the start

    spec = env_spec(env_conf)
    folder = Path(tempfile.mkdtemp(prefix="rlbench-rpc-"))
    servers, procs = [], []
    try:
        for i, k in enumerate(frames):  # every process starts at once: their imports overlap
            servers.append(
                RemoteEnvs(
                    env_conf,
                    spec,
                    k,
                    batch=0,
                    bind=f"unix:{folder / f'rpc{i}.sock'}",
                    join_timeout_s=timeout_s,
                    idle_timeout_s=timeout_s,
                    close_grace_s=1.0,
                )
            )
            procs.append(_start_actor(servers[-1].address, env_conf, k, folder / f"actor{i}.log"))
        joined = _joined(servers, procs, time.perf_counter(), timeout_s)
        return [
            _measure(server, proc, k, seconds, s)
            if s is not None
            else _unmeasured(k, f"the actor process (exit {proc.poll()}) did not join within {timeout_s:g} s")
            for server, proc, k, s in zip(servers, procs, frames, joined, strict=True)
        ]
    finally:
        for server in servers:
            server.close()
        for proc in procs:
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start_actor(address: str, env_conf, envs: int, log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "rlbench.actor",
        "--server",
        address,
        "--envs",
        str(envs),
        "--threads",
        "1",
        *env_overrides(env_conf),
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _joined(servers, procs, t0: float, timeout_s: float) -> list[float | None]:
    """Seconds from `t0` until each actor process joined its server (its Hello arrived); None
    for one that exited or did not join in `timeout_s`."""
    out: list[float | None] = [None] * len(servers)
    deadline = t0 + timeout_s
    while time.perf_counter() < deadline:
        for i, (server, _proc) in enumerate(zip(servers, procs, strict=True)):
            if out[i] is None and server.actors():
                out[i] = time.perf_counter() - t0
        if all(s is not None or p.poll() is not None for s, p in zip(out, procs, strict=True)):
            break
        time.sleep(0.02)  # polling a few seconds of process start-up: nothing to wake on across processes
    return out


def _measure(server, proc: subprocess.Popen, frames: int, seconds: float, start_s: float) -> dict:
    """One actor process's messages for `seconds` after a warm-up, answered at once."""
    batch = server.reset(seed=0)
    actions = np.zeros(len(batch.env_ids), np.int64)
    for _ in range(20):  # warm-up: gRPC's buffers and the actor's first steps
        server.send(actions)
        server.recv()
    cpu, wire, threads = time.process_time(), server.wire_bytes(), _thread_cpu(proc.pid)
    messages, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        server.send(actions)
        server.recv()
        messages += 1
    server_cpu = time.process_time() - cpu
    after, threads_after = server.wire_bytes(), _thread_cpu(proc.pid)
    report = server.actors()[0]["report"]
    row = {
        "frames": frames,
        "messages": messages,
        "server_cpu_s": server_cpu / messages,
        "bytes_up": (after["received"] - wire["received"]) / messages,
        "bytes_down": (after["sent"] - wire["sent"]) / messages,
        "rtt_p50_ms": float(report.rtt_p50_ms) if report is not None else None,
        "start_s": start_s,
        "actor_cpu_s": None,
        "reason": "",
    }
    if threads is None or threads_after is None:
        return row | {"reason": "the actor process's threads are not readable (/proc)"}
    if not any(nice > 0 for nice, _ in threads_after.values()):
        return row | {"reason": "the actor's env threads run at nice 0: cannot tell them from its RPC threads"}
    rpc = sum(s - threads.get(tid, (0, 0.0))[1] for tid, (nice, s) in threads_after.items() if nice == 0)
    return row | {"actor_cpu_s": rpc / messages}


def _unmeasured(frames: int, reason: str) -> dict:
    return {k: None for k in ROW_KEYS} | {"frames": frames, "reason": reason}


def _thread_cpu(pid: int) -> dict[int, tuple[int, float]] | None:
    """{thread id: (nice, CPU seconds)} of process `pid` (Linux /proc; the CPU time from
    schedstat, in nanoseconds, where the kernel keeps it: stat's clock ticks are 10 ms, too
    coarse for a second of messages); None where unreadable."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            cpu = (int(fields[11]) + int(fields[12])) / tick  # fields[0] is stat's field 3: utime 14, stime 15
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    cpu = int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                pass
        except OSError:
            continue  # the thread ended
        out[int(tid)] = (int(fields[16]), cpu)  # nice: stat's field 19
    return out


def fit_rpc(rows: list[dict]) -> dict[str, tuple[float, float]] | None:
    """{key: (fixed per message, per env)} for each of FIT_KEYS over the measured rows, a line
    through them (least squares; measure.fit_cost_line: fixed and slope kept >= 0); None with
    fewer than two measured sizes. A key no row measured is left out."""
    out = {}
    for key in FIT_KEYS:
        pts = [(r["frames"], r[key]) for r in rows if r.get(key) is not None]
        if len({f for f, _ in pts}) < 2:
            continue
        out[key] = fit_cost_line(pts)
    return out or None
