"""Values that no job of a study measured, collapsed to one line naming them and why.

The report leaves such a column or panel out and says once, with the jobs' own `unmeasured`
reasons: `Not measured in any job: power_gpu_w_avg, energy_gpu_j (nvmlInit failed: ...); ...`
(docs/metrics.md, "The report, inside").
"""

from __future__ import annotations

from rlbench.tracking.study_records import JobRun
from rlbench.tracking.unmeasured import DERIVED

PREFIX = "Not measured in any job: "


def never_measured(jobs: list[JobRun], keys: list[str]) -> dict[str, str]:
    """{key: why} for each of `keys` that no job of `jobs` measured (the jobs' distinct reasons,
    joined), followed by the never-measured values a derived one comes from (energy_per_task_j:
    energy_gpu_j, energy_cpu_j), so the line says why at the source. Empty without jobs."""
    if not jobs:
        return {}
    out: dict[str, str] = {}
    for key in keys:
        if all(j.knob(key) is None for j in jobs):
            out[key] = _why(jobs, key)
    for key in list(out):
        for src in DERIVED.get(key, ()):
            if src not in out and all(j.knob(src) is None for j in jobs):
                out[src] = _why(jobs, src)
    return out


def _why(jobs: list[JobRun], key: str) -> str:
    """The jobs' distinct reasons, in job order ('not logged' where a finished job gave none)."""
    return "; ".join(dict.fromkeys(j.nulls.get(key, "not logged") if j.finished else j.why_missing(key) for j in jobs))


def one_line(reasons: dict[str, str]) -> str:
    """'Not measured in any job: a, b (why); c (why)', the values that share a reason named
    together; '' when there are none."""
    by_reason: dict[str, list[str]] = {}
    for key, why in reasons.items():
        by_reason.setdefault(why, []).append(key)
    groups = [f"{', '.join(keys)} ({why})" for why, keys in by_reason.items()]
    return PREFIX + "; ".join(groups) if groups else ""
