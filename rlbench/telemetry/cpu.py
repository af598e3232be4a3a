"""CPU utilisation through psutil: the whole system per core, and this job's process tree.

The tree's CPU seconds are summed per process keyed by (pid, create_time); utilisations are
fractions in [0, 1]. How processes that start or exit between samples count: docs/metrics.md,
"Telemetry, inside".
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

ProcKey = tuple[int, float]


@dataclass(frozen=True)
class CpuSample:
    """System and process-tree utilisation since the previous sample."""

    per_core: tuple[float | None, ...] = ()  # system busy fraction of each hardware thread
    util: float | None = None  # mean of per_core's known values
    proc_util: float | None = None  # process tree, fraction of all hardware threads
    proc_cores_busy: float | None = None  # process tree, in hardware threads kept busy


def tree_cpu_delta(prev: Mapping[ProcKey, float], cur: Mapping[ProcKey, float]) -> float:
    """CPU seconds the tree used between two snapshots (new processes count in full)."""
    return sum(max(cpu - prev.get(key, 0.0), 0.0) for key, cpu in cur.items())


def tree_utilisation(cpu_delta_s: float, wall_s: float, n_threads: int | None) -> tuple[float | None, float | None]:
    """(fraction of all hardware threads, hardware threads busy) for a CPU-time delta."""
    if wall_s <= 0:
        return None, None
    cores = cpu_delta_s / wall_s
    return (cores / n_threads if n_threads else None), cores


# Linux counts guest time in user and nice too (psutil's _cpu_tot_time leaves it out so).
_GUEST = ("guest", "guest_nice")


def core_busy(prev: Sequence[Any], cur: Sequence[Any]) -> tuple[float | None, ...]:
    """Each core's busy fraction between two `psutil.cpu_times(percpu=True)` snapshots: all but
    idle and iowait, over all; None for a core whose counters did not advance (unknown)."""
    out: list[float | None] = []
    for before, after in zip(prev, cur, strict=True):
        delta = {k: max(v - getattr(before, k), 0.0) for k, v in after._asdict().items() if k not in _GUEST}
        total = sum(delta.values())
        idle = delta.get("idle", 0.0) + delta.get("iowait", 0.0)
        out.append((total - idle) / total if total > 0 else None)
    return tuple(out)


def _load_psutil() -> Any:
    return psutil


CHILDREN_TTL_S = 2.0


class CpuSource:
    """Samples system per-core and process-tree CPU utilisation (non-blocking)."""

    def __init__(
        self,
        psutil_module: Any | None = None,
        pid: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ps = psutil_module or _load_psutil()
        self._proc = self._ps.Process(pid if pid is not None else os.getpid())
        self._clock = clock
        self._children: list = []
        self._children_at: float | None = None
        self.n_threads: int | None = self._ps.cpu_count(logical=True)
        # per-core times of our own: psutil's cpu_percent keeps one baseline per calling thread,
        # and the first sample of a thread (the sampler's) measured nothing and read 0
        self._prev_cores = self._ps.cpu_times(percpu=True)
        self._prev_tree = self._tree_times()
        self._prev_t = clock()

    def _tree_times(self) -> dict[ProcKey, float]:
        """CPU seconds (user + system) of every live process in the tree."""
        times: dict[ProcKey, float] = {}
        for p in [self._proc, *self._child_processes()]:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    times[(p.pid, p.create_time())] = t.user + t.system
            except self._ps.Error:  # exited or not ours to read
                continue
        return times

    def _child_processes(self) -> list:
        """The tree below our process, listed again at most every CHILDREN_TTL_S seconds.

        Listing walks every /proc/<pid>/stat of the host, most of a sample's cost (docs/metrics.md);
        a child that appears in between is counted from the next listing on.
        """
        now = self._clock()
        if self._children_at is None or now - self._children_at >= CHILDREN_TTL_S:
            with contextlib.suppress(self._ps.Error):
                self._children = self._proc.children(recursive=True)
            self._children_at = now
        return self._children

    def sample(self) -> CpuSample:
        """Utilisation since the previous sample (or since construction)."""
        times = self._ps.cpu_times(percpu=True)
        per_core, self._prev_cores = core_busy(self._prev_cores, times), times
        tree, now = self._tree_times(), self._clock()
        delta = tree_cpu_delta(self._prev_tree, tree)
        frac, cores = tree_utilisation(delta, now - self._prev_t, self.n_threads)
        self._prev_tree, self._prev_t = tree, now
        known = [u for u in per_core if u is not None]
        util = sum(known) / len(known) if known else None
        return CpuSample(per_core, util, frac, cores)
