"""Jobs grouped into series: one line of a figure, and one actor series of the verdict's knee
(rlbench.report.figures and rlbench.report.findings both group jobs this way)."""

from __future__ import annotations

from collections import defaultdict

from rlbench.report.records import JobRun

GROUP_KEYS = ("actors", "env.id", "actor_threads", "sm_limit", "inference_batch", "workload.name")


def series(jobs: list[JobRun], x_key: str, vary: str) -> dict[str, list[JobRun]]:
    """Jobs with `x_key`, one series per combination of the other knobs that differ across
    `jobs` (named by them, e.g. `sm_limit=8`; `all jobs` when nothing else differs)."""
    jobs = [j for j in jobs if j.knob(x_key) is not None]
    fixed = [k for k in GROUP_KEYS if k != vary and len({j.params.get(k) for j in jobs}) > 1]
    groups: dict[str, list[JobRun]] = defaultdict(list)
    for j in jobs:
        groups[" ".join(f"{k}={j.params.get(k)}" for k in fixed) or "all jobs"].append(j)
    return {g: sorted(js, key=lambda j: j.knob(x_key)) for g, js in groups.items()}
