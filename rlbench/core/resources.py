"""Real resource limits for one job: actor CPU threads and the learner's compute units.

`actor_threads` sizes and pins the vector env's pool; `sm_limit` grants the learner and
inference SMs (a CUDA green context, or MPS) or CPU threads; `cpu_gpu_ratio` is the study's
metric. `cuda_properties`: a GPU read in a child. docs/jobs.md.
"""

from __future__ import annotations

import functools
import math
import os
import platform
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    import torch


def resolve_device(name: str) -> torch.device:
    """The torch.device a job's `device` names: auto is cuda where torch sees one, else cpu."""
    import torch  # lazy: keeps torch off the start

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class ResourceError(ValueError):
    """A limit this host cannot honour; raised before any work starts."""


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    multi_processor_count: int
    major: int


_PROPS = (
    "import sys, torch; p = torch.cuda.get_device_properties(int(sys.argv[1])); "
    "print(p.multi_processor_count, p.major, p.name)"
)


@functools.cache
def cuda_properties(index: int) -> DeviceProperties:
    """SM count, compute capability and name of CUDA device `index`, read in a child process so
    that CUDA stays uninitialised in this one (docs/jobs.md); cached per device."""
    out = subprocess.run(
        [sys.executable, "-c", _PROPS, str(index)], capture_output=True, text=True, timeout=120, check=False
    )
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise ResourceError(f"device=cuda:{index}: its properties could not be read ({why})")
    sms, major, name = out.stdout.strip().splitlines()[-1].split(" ", 2)
    return DeviceProperties(name, int(sms), int(major))


@dataclass
class ComputeGrant:
    compute_unit: str  # "sm" or "cpu_thread"
    backend: str  # "green_context", "mps", "cpu_threads" or "none" (all units)
    requested: int | None  # null = all
    granted: int
    total: int

    def metrics(self, actor_threads: int) -> dict:
        return {
            "sm_granted": self.granted,
            "sm_total": self.total,
            "cpu_gpu_ratio": cpu_gpu_ratio(actor_threads, self.granted),
        }


def cpu_gpu_ratio(actor_threads: int, compute_units: int) -> float:
    """The study's CPU/GPU ratio: CPU hardware threads for actors / compute units (SMs)."""
    if actor_threads < 1 or compute_units < 1:
        raise ValueError(f"cpu_gpu_ratio needs positive counts, got {actor_threads} / {compute_units}")
    return actor_threads / compute_units


def cpu_model() -> str:
    """This host's CPU model (the run's `cpu_model` tag; an actor process's Hello)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass

    return platform.processor() or "unknown (no /proc/cpuinfo model name)"


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))


def sm_granularity(major: int) -> tuple[int, int]:
    """(minimum, multiple) of an SM split on compute capability `major` (CUDA driver docs)."""
    if major >= 9:
        return 8, 8
    if major == 8:
        return 4, 2
    return 2, 2


def granted_sms(requested: int, total: int, major: int) -> int:
    """SMs a green context of `requested` SMs gets: rounded up to the granularity, capped."""
    minimum, multiple = sm_granularity(major)
    return min(max(minimum, math.ceil(requested / multiple) * multiple), total)


def mps_daemon_reachable(env: dict | None = None) -> tuple[bool, str]:
    env = os.environ if env is None else env
    pipe_dir = Path(env.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"))
    control = pipe_dir / "control"
    if control.exists():
        return True, f"MPS control pipe at {control}"
    return False, f"no MPS control daemon: {control} does not exist (start nvidia-cuda-mps-control -d)"


_green_jobs: set[int] = set()  # the ComputeLimits of this process inside a green context (at most one)


def in_autograd_thread(torch_mod, device, fn) -> None:
    """Calls `fn()` in the thread where torch's autograd runs `device`'s backward ops.

    Autograd runs a CUDA device's backward ops in its own engine thread, not in the thread that
    calls backward(). A green context is current per thread, so the learner's backward would
    run outside the job's green context: on every SM, and on the primary context's null stream,
    which torch takes for the green context's (both are its stream 0), so nothing orders the
    two and the caching allocator hands memory still in use from one to the other (seen on an
    H200: index-out-of-bounds asserts in inference after two updates). A backward through a node
    whose backward calls `fn` runs `fn` in that thread (`set_context` there before the roles
    start, `pop_context` after they end). docs/jobs.md, "The compute grant"."""

    class _Call(torch_mod.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            fn()
            return grad

    with torch_mod.inference_mode(False), torch_mod.enable_grad():  # entered inside no_grad too
        x = torch_mod.zeros(1, device=device, requires_grad=True)
        _Call.apply(x).sum().backward()
    if getattr(device, "type", str(device)) == "cuda":
        torch_mod.cuda.synchronize()


class ComputeLimit:
    """Applies `sm_limit` for one job; use as a context manager around the job.

    `thread_scope()` wraps the body of every thread that runs learner or inference work
    (a green context is current per thread). Process-wide state (torch's intra-op thread
    count) is restored on exit, so jobs that share a process do not leak limits.
    """

    def __init__(
        self,
        sm_limit: int | None,
        device,
        backend: str = "green_context",
        torch_mod=None,
        env: dict | None = None,
        properties=None,
    ):
        import torch as _torch  # lazy: keeps torch off the start

        self.torch = torch_mod or _torch
        self.properties = properties or cuda_properties  # device index -> DeviceProperties, CUDA untouched
        self.device, self.backend_name, self.env = device, backend, os.environ if env is None else env
        self.sm_limit = sm_limit
        self._ctx = None
        self._saved_threads: int | None = None
        self.grant = self._plan()

    def _plan(self) -> ComputeGrant:
        if getattr(self.device, "type", str(self.device)) != "cuda":
            if self.backend_name == "mps":
                raise ResourceError(
                    f"sm_backend=mps: MPS splits a CUDA GPU and this job's device is {self.device} "
                    "(no CUDA device here, or device=cpu); allowed: sm_backend=green_context, which "
                    "on a CPU device caps the learner's and inference's threads at sm_limit"
                )
            total = len(usable_cpus())
            if self.sm_limit is not None and self.sm_limit > total:
                raise ResourceError(
                    f"sm_limit={self.sm_limit}: this host has {total} CPU threads for the "
                    f"learner and inference; allowed: null or 1..{total}"
                )
            n = self.sm_limit or total
            return ComputeGrant("cpu_thread", "cpu_threads" if self.sm_limit else "none", self.sm_limit, n, total)
        index = self.device.index if self.device.index is not None else 0
        props = self.properties(index)
        total = props.multi_processor_count
        if self.sm_limit is None:
            return ComputeGrant("sm", "none", None, total, total)
        if self.sm_limit > total:
            raise ResourceError(f"sm_limit={self.sm_limit}: {props.name} has {total} SMs; allowed: null or 1..{total}")
        if self.backend_name == "mps":
            ok, why = mps_daemon_reachable(self.env)
            if not ok:
                raise ResourceError(
                    f"sm_backend=mps refused: {why}; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE would silently do nothing"
                )
            self._refuse_initialised()
            return ComputeGrant("sm", "mps", self.sm_limit, self.sm_limit, total)
        return ComputeGrant("sm", "green_context", self.sm_limit, granted_sms(self.sm_limit, total, props.major), total)

    def __enter__(self) -> Self:
        g = self.grant
        if g.backend == "cpu_threads":
            self._saved_threads = self.torch.get_num_threads()
            self.torch.set_num_threads(g.granted)
        elif g.backend == "mps":
            self._refuse_initialised()
            self.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(1, round(100 * g.granted / g.total)))
        elif g.backend == "green_context":
            from torch.cuda.green_contexts import GreenContext  # lazy: keeps torch off the start

            if _green_jobs:  # the autograd thread it enters is the process's one
                raise ResourceError(
                    f"sm_limit={self.sm_limit} (sm_backend=green_context): another job of this "
                    "process holds a green context; allowed: one such job at a time per process"
                )
            index = self.device.index if self.device.index is not None else self.torch.cuda.current_device()
            # The device's primary context first: a green context is carved from it, and without
            # one torch warns "no primary context" (seen on an H100) and makes it itself.
            self.torch.cuda.synchronize(index)
            self._ctx = GreenContext.create(num_sms=g.requested, device_id=index)
            in_autograd_thread(self.torch, self.device, self._ctx.set_context)
            _green_jobs.add(id(self))
        return self

    def _refuse_initialised(self) -> None:
        """MPS's variable is read when CUDA starts: in a process where it has started, refuse
        (at the plan, before any run exists, and again when the limit is entered)."""
        if self.torch.cuda.is_initialized():
            raise ResourceError(
                "sm_backend=mps needs a fresh process: CUDA is already initialised here (an "
                "earlier job of this process used it); allowed: one process per job (a launcher "
                "such as hydra/launcher=parallel), or sm_backend=green_context"
            )

    def __exit__(self, *exc) -> None:
        if self._saved_threads is not None:
            self.torch.set_num_threads(self._saved_threads)
        if self._ctx is not None:
            _green_jobs.discard(id(self))
            try:
                in_autograd_thread(self.torch, self.device, self._ctx.pop_context)
            except Exception:
                if exc[0] is None:
                    raise
        if self.grant.backend == "mps":
            self.env.pop("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", None)

    def thread_scope(self):
        """Context manager for a role thread: its CUDA work runs inside the green context."""

        @contextmanager
        def scope():
            if self._ctx is None:
                yield
                return
            self._ctx.set_context()
            try:
                yield
            finally:
                self._ctx.pop_context()

        return scope()
