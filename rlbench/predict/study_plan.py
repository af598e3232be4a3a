"""The GPU study's plan (pipelines/gpu_study.py): its three stages' jobs with their predicted
seconds, the task's frames sized to the budget, a plan over its budget refused naming the job to
cut, and a stage cut down to the time left. Predictions come from a `predict(knobs, frames)`
callable (rlbench.predict.jobs on a datasheet profile); overheads are estimates. docs/gpu.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rlbench.core.resources import sm_granularity

STAGES = {"actors": "actor sweep", "sms": "SM sweep", "precision": "precision"}
PLAN_FILE = "stage_plan.json"  # under a stage's --out: its parts, as its first part planned them (--plan-from)
FRAMES_LADDER = (25_000, 50_000, 100_000, 200_000, 400_000, 800_000, 1_600_000)
MARGIN = 0.75  # the share of the budget an auto-sized plan may fill: the rest is for the estimate's error

Predict = Callable[[dict, int], tuple[float, str]]  # (knobs, frames) -> (predicted runtime_s, bound)


class PlanError(ValueError):
    """A plan that cannot run: what, and the way out."""


@dataclass(frozen=True)
class Overheads:
    """Seconds outside the jobs' tasks (estimates until measured): the plan itself on the GPU host
    (imports, the GPU's probes, env stepping measured, the FLOPs counted), a sweep's process
    (Python, torch, MLflow, the store, CUDA's start), a job's own start and end around its task
    (envs, networks, its run's record), the report and the summary."""

    plan_s: float = 30.0
    sweep_start_s: float = 25.0
    job_s: float = 10.0
    report_s: float = 30.0


@dataclass
class Job:
    stage: str
    actors: int
    sm_limit: int | None = None  # None: every unit
    precision: str = "fp32"
    runtime_s: float = 0.0  # predicted task time
    bound: str = ""
    reused: str | None = None  # the job of an earlier stage that is this one (not run again)

    @property
    def name(self) -> str:
        sm = "all" if self.sm_limit is None else str(self.sm_limit)
        return f"actors={self.actors} sm_limit={sm} precision={self.precision}"

    def seconds(self, o: Overheads) -> float:
        return 0.0 if self.reused else self.runtime_s + o.job_s


@dataclass
class Plan:
    frames: int
    jobs: list[Job]
    best_actors: int
    overheads: Overheads = field(default_factory=Overheads)

    def stage(self, stage: str) -> list[Job]:
        return [j for j in self.jobs if j.stage == stage]

    def stage_s(self, stage: str) -> float:
        run = [j for j in self.stage(stage) if not j.reused]
        return self.overheads.sweep_start_s + sum(j.seconds(self.overheads) for j in run) if run else 0.0

    def total_s(self) -> float:
        return sum(self.stage_s(s) for s in STAGES) + self.overheads.report_s

    def longest(self) -> Job:
        return max((j for j in self.jobs if not j.reused), key=lambda j: j.runtime_s)


def sm_points(total: int, major: int | None) -> list[int | None]:
    """Every unit (None), then half, a quarter, 16 and 8 of `total`, each rounded down to what a
    green context grants exactly on compute capability `major` (None: CPU threads, any count),
    kept where below `total` and at least the smallest grant; no value twice."""
    smallest, multiple = sm_granularity(major) if major is not None else (1, 1)
    points: list[int | None] = [None]
    for want in (total // 2, total // 4, 16, 8):
        v = want // multiple * multiple
        if smallest <= v < total and v not in points:
            points.append(v)
    return points


def later_jobs(
    best: int, sms: list[int | None], compare: str | None, frames: int, predict: Predict, scale: float = 1.0
) -> list[Job]:
    """The SM sweep and the precision comparison at `best` actors; the all-units fp32 job is the
    actor sweep's (reused). `scale`: measured over predicted task time of the actor sweep's
    best job, applied to these predictions."""
    jobs = []
    for sm in sms:
        jobs.append(
            _job(
                "sms", best, sm, "fp32", frames, predict, scale, reused="the actor sweep's job" if sm is None else None
            )
        )
    if compare:
        jobs.append(_job("precision", best, None, compare, frames, predict, scale))
    return jobs


def _job(
    stage: str,
    actors: int,
    sm: int | None,
    precision: str,
    frames: int,
    predict: Predict,
    scale: float = 1.0,
    reused: str | None = None,
) -> Job:
    runtime, bound = predict({"actors": actors, "sm_limit": sm, "precision": precision}, frames)
    return Job(stage, actors, sm, precision, runtime * scale, bound, reused)


def build_plan(
    actors: list[int],
    sms: list[int | None],
    compare: str | None,
    frames: int,
    predict: Predict,
    overheads: Overheads = Overheads(),
) -> Plan:
    """The study at `frames`: the actor sweep (all units, fp32), then at its predicted best actor
    count (the shortest task) the SM sweep and `compare` (a precision, or None) against fp32."""
    first = [_job("actors", a, None, "fp32", frames, predict) for a in actors]
    best = min(first, key=lambda j: j.runtime_s).actors
    return Plan(frames, first + later_jobs(best, sms, compare, frames, predict), best, overheads)


def size_frames(make: Callable[[int], Plan], budget_s: float, ladder=FRAMES_LADDER, spent_s: float = 0.0) -> Plan:
    """The plan at the most frames of `ladder` whose predicted total fills at most MARGIN of the
    budget left after `spent_s` (the planning); PlanError naming the job to cut when even the
    fewest frames do not fit."""
    best, limit = None, MARGIN * (budget_s - spent_s)
    for frames in ladder:
        plan = make(frames)
        if plan.total_s() > limit:
            break
        best = plan
    if best is None:
        raise PlanError(over_budget(make(ladder[0]), limit, budget_s, auto=True, spent_s=spent_s))
    return best


def over_budget(plan: Plan, limit_s: float, budget_s: float, auto: bool = False, spent_s: float = 0.0) -> str:
    """The refusal of a plan predicted over `limit_s`: the total, the longest job and how to cut it."""
    job = plan.longest()
    fit = f"{MARGIN:.0%} of " if auto else ""
    left = f" left after {spent_s:.0f} s of planning" if spent_s >= 0.5 else ""
    frames = f"even at the fewest frames tried ({plan.frames})" if auto else f"at workload.frames={plan.frames}"
    need = math.ceil(plan.total_s() / (MARGIN if auto else 1.0) + spent_s)
    return (
        f"--budget-s={budget_s:g}: the plan's predicted {plan.total_s():.0f} s exceed {fit}the budget{left} "
        f"({limit_s:.0f} s) {frames}; cut the job {job.name} of the {STAGES[job.stage]} (predicted "
        f"{job.runtime_s:.0f} s, the longest): {cut_flag(plan, job)}; or allowed: --budget-s >= {need}"
    )


def cut_flag(plan: Plan, job: Job) -> str:
    """The flag that leaves `job` out."""
    if job.stage == "actors":
        rest = [str(j.actors) for j in plan.stage("actors") if j is not job]
        return f"--actors {','.join(rest)}" if rest else "--actors with other counts"
    if job.stage == "sms":
        rest = ["all" if j.sm_limit is None else str(j.sm_limit) for j in plan.stage("sms") if j is not job]
        return f"--sm-limits {','.join(rest)}"
    return "--compare none"


def fit_stage(jobs: list[Job], left_s: float, o: Overheads) -> tuple[list[Job], list[Job]]:
    """(kept, cut): the stage's jobs to run within `left_s`, the longest predicted cut first."""
    kept = [j for j in jobs if not j.reused]
    cut: list[Job] = []
    while kept and o.sweep_start_s + sum(j.seconds(o) for j in kept) > left_s:
        longest = max(kept, key=lambda j: j.runtime_s)
        kept.remove(longest)
        cut.append(longest)
    return kept, cut


def measured_overheads(o: Overheads, wall_s: float, runtimes: list[float]) -> Overheads:
    """The job overhead a finished stage measured: its wall time less the sweep's start and the
    tasks' runtime_s, per job (never below zero)."""
    if not runtimes:
        return o
    return replace(o, job_s=max(0.0, (wall_s - o.sweep_start_s - sum(runtimes)) / len(runtimes)))
