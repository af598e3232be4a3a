"""CPU utilisation through psutil: the whole system per core, and this job's process tree.

The tree's CPU seconds are summed per process keyed by (pid, create_time); utilisations are
fractions in [0, 1]. How processes that start or exit between samples count: docs/metrics.md,
"Telemetry, inside".
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psutil

ProcKey = tuple[int, float]


@dataclass(frozen=True)
class CpuSample:
    """System and process-tree utilisation since the previous sample."""

    per_core: tuple[float, ...] = ()  # system busy fraction of each hardware thread
    util: float | None = None  # mean of per_core
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
        self._ps.cpu_percent(percpu=True)  # prime: the next call measures from here
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
        per_core = tuple(p / 100.0 for p in self._ps.cpu_percent(percpu=True))
        tree, now = self._tree_times(), self._clock()
        delta = tree_cpu_delta(self._prev_tree, tree)
        frac, cores = tree_utilisation(delta, now - self._prev_t, self.n_threads)
        self._prev_tree, self._prev_t = tree, now
        util = sum(per_core) / len(per_core) if per_core else None
        return CpuSample(per_core, util, frac, cores)
