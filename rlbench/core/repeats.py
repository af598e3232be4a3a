"""Repeats: several runs of one configuration, told by their median and their spread.

Medians, min..max and counts per configuration of a sweep's rows; how configurations compare
(the noise floor, told apart or not) is the verdict rule's: rlbench/core/verdict.py. Pure
functions over numbers and plain rows. docs/metrics.md, "The verdict".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

STAT_METRICS = ("runtime_s", "task_fps", "fps", "energy_per_task_j")  # summarised per configuration


@dataclass(frozen=True)
class Spread:
    median: float
    low: float  # the smallest run
    high: float  # the largest run
    n: int  # runs with a value

    @property
    def width(self) -> float | None:
        """high - low; None with one run (the spread is unknown, not 0)."""
        return self.high - self.low if self.n > 1 else None

    def text(self, digits: int = 4) -> str:
        """`72.8 (70.1..75.3, n=3)`; one run: `72.8`."""
        m = f"{self.median:.{digits}g}"
        return m if self.n == 1 else f"{m} ({self.low:.{digits}g}..{self.high:.{digits}g}, n={self.n})"

    def as_dict(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n, "spread": self.width}


def spread(values: Iterable[float | None]) -> Spread | None:
    """Median and range of the finite values (None and NaN are left out); None when none is left."""
    xs = sorted(float(v) for v in values if isinstance(v, int | float) and math.isfinite(v))
    return Spread(statistics.median(xs), xs[0], xs[-1], len(xs)) if xs else None


def group_by(items: Iterable[T], key: Callable[[T], Hashable]) -> dict[Hashable, list[T]]:
    """Items by key, keys in the order first seen, items in their order."""
    out: dict[Hashable, list[T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def config_key(row: dict) -> str:
    """A sweep summary row's configuration: the sweep's `config` (its overrides less the
    repeats' seed), else the job's own name (one run per configuration)."""
    return row.get("config") or row.get("name") or row.get("overrides") or str(row.get("job"))


def config_rows(rows: list[dict], metrics: Iterable[str] = STAT_METRICS) -> list[dict]:
    """One row per configuration of a sweep's per-job rows: `config`, `runs` (jobs), `finished`,
    `jobs` (their indices), `status` and per metric its Spread over the finished jobs (None when
    no finished job has it). `cpu_gpu_ratio` and other values are taken from the first
    finished job (they do not change between repeats)."""
    out = []
    for key, rs in group_by(rows, config_key).items():
        done = [r for r in rs if r.get("status") == "FINISHED"]
        counts = group_by(rs, lambda r: str(r.get("status", "?")).split(" ")[0])
        out.append(
            {
                "config": key,
                "runs": len(rs),
                "finished": len(done),
                "jobs": [r.get("job") for r in rs],
                "status": ", ".join(f"{len(v)} {k}" for k, v in counts.items()),
            }
            | {m: spread(r.get(m) for r in done) for m in metrics}
        )
    return out


def repeated(rows: list[dict]) -> bool:
    """Whether some configuration of a sweep's rows ran more than once."""
    return any(len(rs) > 1 for rs in group_by(rows, config_key).values())
