"""How right the model is: every finished job of a real sweep predicted from a profile (taken
on the job's host, not fitted to the jobs) next to what the job measured.

prediction_error = the larger of the median absolute percentage errors of `fps` and of
`runtime_s` over the finished jobs (the larger, so a good fps cannot hide a bad runtime).
docs/predict.md, "How right it is"."""

from __future__ import annotations

import shlex
import statistics
from dataclasses import dataclass

from rlbench.predict.jobs import JobPrediction, Machine, predict_job
from rlbench.prepare.compose import compose_job

COMPARED = ("fps", "runtime_s")


@dataclass
class Checked:
    run_id: str
    name: str
    predicted: JobPrediction
    measured: dict[str, float]

    def ape(self, key: str) -> float:
        return abs(getattr(self.predicted, key) - self.measured[key]) / self.measured[key]


def job_conf(tags: dict, params: dict | None = None):
    """The job's validated config, composed again from its `overrides` tag (tracking.* dropped:
    where it was recorded does not change the work). The recorded param `inference_batch` is
    kept where no override set it: a record may carry another default than today's (0, lock-step)."""

    overrides = [
        o
        for o in shlex.split(tags.get("overrides", ""))
        if o != "(none)" and not o.lstrip("+~").startswith(("tracking.", "hydra."))
    ]
    recorded = (params or {}).get("inference_batch")
    if recorded is not None and not any(o.lstrip("+~").startswith("inference_batch=") for o in overrides):
        overrides.append(f"inference_batch={recorded}")
    return compose_job(overrides, host=False)


def check_jobs(jobs, m: Machine) -> list[Checked]:
    """`jobs`: the sweep's JobRuns (rlbench.tracking.study_records); the finished ones with both metrics."""
    out = []
    for j in jobs:
        if not j.finished or any(j.value(k) is None for k in COMPARED):
            continue
        p = predict_job(job_conf(j.tags, j.params), m)
        out.append(Checked(j.run_id, j.name, p, {k: j.value(k) for k in COMPARED}))
    return out


def prediction_error(checked: list[Checked]) -> tuple[float, dict[str, float]]:
    """(the larger median APE, {metric: median APE})."""
    if not checked:
        raise ValueError("no finished job with fps and runtime_s to compare")
    per = {k: statistics.median(c.ape(k) for c in checked) for k in COMPARED}
    return max(per.values()), per
