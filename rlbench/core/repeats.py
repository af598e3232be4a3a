"""Repeats: several runs of one configuration, told by their median and their spread.

Configurations compare by their medians and differ only by more than the measured spread (the
wider of their two min..max ranges); one run each: the spread is unknown, and comparisons say
so. Pure functions over numbers and plain rows. docs/metrics.md, "The report, inside".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

STAT_METRICS = ("runtime_s", "task_fps", "fps", "energy_per_task_j")  # summarised per configuration
SINGLE_RUN = "single run per configuration: the spread is unknown; rerun with repeats=3 to tell"


@dataclass(frozen=True)
class Spread:
    median: float
    low: float   # the smallest run
    high: float  # the largest run
    n: int       # runs with a value

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


def pair_spread(a: Spread | None, b: Spread | None) -> float | None:
    """The measured spread two configurations are compared against: the wider of their ranges
    (None when neither had more than one run)."""
    widths = [s.width for s in (a, b) if s is not None and s.width is not None]
    return max(widths) if widths else None


def cannot_tell(a: float, b: float, width: float | None, unit: str = "s") -> str | None:
    """None when a and b differ by more than the measured spread `width`; else why they cannot
    be told apart (`cannot tell apart: difference 1.0 s < spread 2.3 s`). width None (unknown
    spread): None; the caller says the spread is unknown (SINGLE_RUN)."""
    if width is None:
        return None
    diff = abs(a - b)
    if diff > width:
        return None
    return f"cannot tell apart: difference {diff:.1f} {unit} {'<' if diff < width else '='} spread {width:.1f} {unit}"


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
        out.append({"config": key, "runs": len(rs), "finished": len(done), "jobs": [r.get("job") for r in rs],
                    "status": ", ".join(f"{len(v)} {k}" for k, v in counts.items())}
                   | {m: spread(r.get(m) for r in done) for m in metrics})
    return out


def best_config(configs: list[dict], metric: str = "runtime_s") -> dict | None:
    """The configuration with the smallest median `metric` (None when none has one)."""
    known = [c for c in configs if c.get(metric) is not None]
    return min(known, key=lambda c: c[metric].median) if known else None


def repeated(rows: list[dict]) -> bool:
    """Whether some configuration of a sweep's rows ran more than once."""
    return any(len(rs) > 1 for rs in group_by(rows, config_key).values())


def rivals(configs: list[dict], best: dict, metric: str = "runtime_s", unit: str = "s") -> list[tuple[str, str]]:
    """(name, `cannot tell apart: difference 1.0 s < spread 2.3 s`) for each other configuration
    whose median `metric` is within the measured spread of the best one's."""
    out = []
    for c in configs:
        if c is best or c.get(metric) is None:
            continue
        why = cannot_tell(best[metric].median, c[metric].median, pair_spread(best[metric], c[metric]), unit)
        if why:
            out.append((c["config"], why))
    return out
