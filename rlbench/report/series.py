"""Jobs grouped into series: one line of a figure, and one actor series of the verdict's knee
(rlbench.report.figures and rlbench.report.findings both group jobs this way; docs/metrics.md)."""

from __future__ import annotations

from collections import defaultdict

from rlbench.tracking.study_records import JobRun

GROUP_KEYS = ("actors", "env.id", "actor_threads", "sm_limit", "inference_batch", "workload.name", "precision")


DEFAULTS = {"precision": "fp32"}  # what a job without the param ran (its config_hash is the same)


def _param(j: JobRun, key: str) -> str | None:
    return j.params.get(key, DEFAULTS.get(key))


def series(jobs: list[JobRun], x_key: str, vary: str) -> dict[str, list[JobRun]]:
    """Jobs with `x_key`, one series per combination of the other knobs that differ across
    `jobs` (named by them, e.g. `sm_limit=8`; `all jobs` when nothing else differs)."""
    jobs = [j for j in jobs if j.knob(x_key) is not None]
    fixed = [k for k in GROUP_KEYS if k != vary and len({_param(j, k) for j in jobs}) > 1]
    groups: dict[str, list[JobRun]] = defaultdict(list)
    for j in jobs:
        groups[" ".join(f"{k}={_param(j, k)}" for k in fixed) or "all jobs"].append(j)
    return {g: sorted(js, key=lambda j: j.knob(x_key)) for g, js in groups.items()}


def actor_axis(jobs: list[JobRun]) -> str | None:
    """The knob a sweep scales its actors out by: actor_hosts where it varies, else actor_procs
    where it varies, else None."""
    for key in ("actor_hosts", "actor_procs"):
        if len({j.knob(key) or 0 for j in jobs}) > 1:
            return key
    return None
