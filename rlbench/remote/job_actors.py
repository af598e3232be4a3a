"""A job's actors in other processes (actor_procs, actor_server.*): the job's `RemoteEnvs` and
the actor processes it starts on this host, one VectorEnv to the trainer (`JobActors`). It
listens, starts the processes, waits in reset() until every env joined and reaps them in
close(); with actor_hosts > 0 it also places actor tasks (remote/tasks.py).
docs/actors.md, "What runs where"; docs/scale-out.md, "6. Actor hosts".
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from rlbench.core.address import TOKEN_ENV, cpu_text
from rlbench.core.env_families import family
from rlbench.core.resources import usable_cpus
from rlbench.remote.handoff import ensure_token, reachable, write_address
from rlbench.remote.hub import RemoteError
from rlbench.remote.tasks import ActorTasks
from rlbench.remote.telemetry import as_columns, hosts_tag, process_metrics

log = logging.getLogger(__name__)

EXIT_GRACE_S = 10.0  # every actor process is gone within 10 s of the job's end (docs/actors.md)
TASKS_BIND = "0.0.0.0:0"  # actor tasks on other nodes: every interface, any free port (the address file says which)


def split(n: int, parts: int) -> list[int]:
    """`n` as `parts` sizes differing by at most one, larger first."""
    if parts < 1 or n < parts:
        raise ValueError(f"cannot split {n} envs over {parts} processes (at least one each)")
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def env_shares(conf, total_envs: int) -> tuple[list[int], list[int]]:
    """(each local actor process's envs, each actor task's): the envs hand-started actors do not
    bring (actor_server.remote_envs) split over actor_procs + actor_hosts, the local ones first."""
    parts = conf.actor_procs + conf.actor_hosts
    sizes = split(total_envs - conf.actor_server.remote_envs, parts) if parts else []
    return sizes[: conf.actor_procs], sizes[conf.actor_procs :]


def env_overrides(env_cfg) -> list[str]:
    """Overrides that compose `env_cfg` again (`python -m rlbench.actor ... <these>`): the
    family's preset for its id, then every field, so the actor's env spec is the job's."""
    fields = {k: v for k, v in dataclasses.asdict(env_cfg).items() if k not in ("kind", "id")}
    return [*family(env_cfg.kind).overrides(env_cfg.id).split(), *(f"env.{k}={_value(v)}" for k, v in fields.items())]


def _value(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(v)


class JobActors:
    """The VectorEnv of a job whose envs step in actor processes (docs/actors.md)."""

    def __init__(self, conf, spec, total_envs: int, pin: int = -1, placement=None):
        """placement: where actor tasks go (rlbench/prepare/plan.py Placement; None: local processes, files
        in a temporary folder), for actor_hosts > 0."""
        from rlbench.remote.server import (
            RemoteEnvs,  # lazy: keeps grpc off the start (only jobs with actor processes use it)
        )

        server = conf.actor_server
        self._dir = Path(tempfile.mkdtemp(prefix="rlbench-actors-"))
        bind = server.bind or (TASKS_BIND if conf.actor_hosts else f"unix:{self._dir / 'actors.sock'}")
        # A token made for this job's actor tasks is this job's: gone from the environment when it
        # closes, so a later job of the same process (a sweep) never passes it off as the user's.
        self._made_token = bool(conf.actor_hosts) and ensure_token()
        if self._made_token:
            log.info("actor tasks: a random token made for this job (%s, in the environment only)", TOKEN_ENV)
        self.tasks = None
        try:
            self.remote = RemoteEnvs(
                conf.env,
                spec,
                total_envs,
                batch=conf.inference_batch,
                bind=bind,
                token=os.environ.get(TOKEN_ENV) or None,
                join_timeout_s=server.join_timeout_s,
                idle_timeout_s=server.idle_timeout_s,
                spans=conf.telemetry.enabled and conf.telemetry.trace_window_s > 0,
            )
        except BaseException:
            self._forget_token()
            raise
        for name in ("frameskip", "obs_shape", "obs_dtype", "num_actions", "inference_batch", "address"):
            setattr(self, name, getattr(self.remote, name))
        local, tasks = env_shares(conf, total_envs)
        try:
            self.local = LocalActors(self.remote, self._dir, conf, sum(local), pin)
            if conf.actor_hosts:
                self.tasks = self._place(conf, tasks, placement)
        except BaseException:  # a process or task that could not be started: nothing left listening or running
            self.close()
            raise

    def _place(self, conf, sizes: list[int], placement):
        """The actor tasks (remote/tasks.py), one per size, told the address other nodes reach."""

        kind = placement.executor if placement is not None else "local"
        folder = placement.folder if placement is not None and placement.folder is not None else self._dir
        address_file = write_address(folder, reachable(self.address))
        return ActorTasks(
            kind,
            folder / "actor-tasks",
            conf.actor_launch,
            sizes,
            env_overrides(conf.env),
            address_file,
            conf.actor_server.join_timeout_s,
            self.remote.fail,
        )

    @property
    def threads_used(self) -> int:
        """Hardware threads of the joined processes, capped per host (remote/telemetry.py
        counted_threads): this job's own share the CPUs they are pinned to or may use."""
        return self.remote.threads_used

    def reset(self, seed: int):
        try:
            return self.remote.reset(seed)
        except RemoteError as e:
            missing = (
                self.tasks.missing({r["task"] for r in self.remote.process_rows() if r["task"]})
                if self.tasks is not None
                else ""
            )
            if not missing:
                raise
            raise RemoteError(f"{e}; {missing}") from None

    def send(self, actions) -> None:
        self.remote.send(actions)

    def recv(self):
        return self.remote.recv()

    def take_disconnected(self):
        return self.remote.take_disconnected()

    def trace_tracks(self, t0: float, window_s: float) -> list:
        """The actor processes' timeline tracks (the job's telemetry draws them in trace.json)."""
        return self.remote.trace_tracks(t0, window_s)

    def metrics(self) -> dict:
        """What the actor processes measured (their latest Reports, one a second) and the
        wire's bytes: rpc_rtt_ms (the median of the connected processes' p50), rpc_rtt_ms_p99
        (their largest p99), wire_bytes_per_step (message bytes both ways per env step),
        actor_rejoins, actor_refused, and the `actor_procs` role with one `actor_proc<i>` role per process
        (remote/telemetry.py process_metrics); a value no process reported is left out."""
        wire = self.remote.wire_bytes()
        m = {"wire_bytes_per_step": (wire["received"] + wire["sent"]) / wire["env_steps"]} if wire["env_steps"] else {}
        reports = [a["report"] for a in self.remote.actors() if a["report"] is not None and a["report"].steps]
        if reports:
            m |= {
                "rpc_rtt_ms": float(np.median([r.rtt_p50_ms for r in reports])),
                "rpc_rtt_ms_p99": float(max(r.rtt_p99_ms for r in reports)),
            }
        m["actor_rejoins"] = self.remote.counts.get("rejoins", 0)
        m["actor_refused"] = sum(n for kind, n in self.remote.counts.items() if kind.startswith("refused_"))
        return m | process_metrics(self.remote.process_rows())

    def tables(self) -> dict[str, dict[str, list]]:
        """The run's table artifacts: every actor process (`actors/processes.json`) and every
        actor host (`actors/hosts.json`), as {column: values}."""
        return {
            "actors/processes.json": as_columns(self.remote.process_rows()),
            "actors/hosts.json": as_columns(self.remote.host_rows()),
        }

    def tags(self) -> dict[str, str]:
        """`actor_hosts`: each actor host, its hardware threads and CPU model, its processes."""
        return {"actor_hosts": hosts_tag(self.remote.host_rows())}

    def close(self) -> None:
        try:
            self.remote.close()
        finally:
            try:
                if getattr(self, "local", None) is not None:
                    self.local.stop()
            finally:
                if self.tasks is not None:
                    self.tasks.stop(EXIT_GRACE_S)
                shutil.rmtree(self._dir, ignore_errors=True)
                self._forget_token()

    def _forget_token(self) -> None:
        if self._made_token:
            os.environ.pop(TOKEN_ENV, None)
            self._made_token = False


class LocalActors:
    """The actor processes a job starts on this host: started, watched (one that exits before
    the job's envs all joined fails the job's reset with its last lines), stopped and reaped.

    Each process gets its family's whole pool of actor threads (Atari: actor_threads, or every
    CPU), all processes on the same CPUs (`pin` >= 0, an explicit actor_threads: pin .. pin +
    actor_threads - 1, the CPUs an in-process job pins its actors to), not a share each: the
    processes share those hardware threads as SEED's actors share a host's cores. A process
    lock-steps its envs, so its threads idle while its actions are computed; with a share each,
    a core idles with them (docs/actors.md)."""

    def __init__(self, remote, folder: Path, conf, envs: int, pin: int = -1):
        self.remote, self.procs, self._stopping = remote, [], threading.Event()
        if not conf.actor_procs:
            return
        sizes = split(envs, conf.actor_procs)
        threads = family(conf.env.kind).hardware_threads(conf.actor_threads, len(usable_cpus()))
        pinned = ["--cpus", cpu_text(range(pin, pin + threads))] if pin >= 0 else []
        overrides = env_overrides(conf.env)
        try:
            for i, n in enumerate(sizes):
                log = folder / f"actor-{i}.log"
                cmd = [
                    sys.executable,
                    "-m",
                    "rlbench.actor",
                    "--server",
                    remote.address,
                    "--envs",
                    str(n),
                    "--threads",
                    str(threads),
                    *pinned,
                    *overrides,
                ]
                with open(log, "wb") as out:  # the child keeps its own descriptor
                    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                self.procs.append(proc)
                threading.Thread(target=self._watch, args=(i, proc, log), name=f"actor-proc-{i}", daemon=True).start()
        except BaseException:
            self.stop(grace_s=0.0)  # those already started
            raise

    def _watch(self, i: int, proc: subprocess.Popen, log: Path) -> None:
        code = proc.wait()
        if not self._stopping.is_set():  # before the start a failure; after it, the hub's disconnect
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:]) if log.exists() else ""
            self.remote.fail(
                f"actor process {i} (pid {proc.pid}) exited with {code} before its envs joined"
                + (f": {tail}" if tail else "")
            )

    def stop(self, grace_s: float = EXIT_GRACE_S) -> None:
        """After the server closed the streams (the processes exit 0): wait, all of them within
        one `grace_s`, then kill the rest."""
        self._stopping.set()
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
