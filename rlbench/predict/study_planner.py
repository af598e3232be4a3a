"""The whole GPU study's plan (pipelines/gpu_study.py without --stage): the actor sweep, the SM
sweep and the precision comparison, frames sized to the budget on this host's predictions; the
plan's lines as the dry run prints them; every planned job validated before any runs. `args` is
the command's flags as parsed. docs/gpu.md.
"""

from __future__ import annotations

import time

from rlbench.predict.study_host import Host, where
from rlbench.predict.study_plan import STAGES, Overheads, Plan, PlanError, build_plan, over_budget, size_frames
from rlbench.predict.study_predictor import Predictor, job_overrides, predictor_for, profiles_for
from rlbench.prepare.compose import compose_job


def make_plan(args, host: Host, base: list[str], sms: list[int | None], t0: float) -> tuple[Plan, Predictor, list[str]]:
    """The plan, its predictor and the notes it rests on; PlanError where no plan fits the budget."""
    conf = compose_job([*base, f"actors={max(args.actors)}"], host=False)
    units = sorted({host.units if s is None else s for s in sms})
    profiles, how = profiles_for(conf, host, args.compare, units, args.actors)
    predict = predictor_for(base, profiles, host)

    def make(frames: int) -> Plan:
        return build_plan(args.actors, sms, args.compare, frames, predict, Overheads())

    # the planning counts against the budget: as it took here, or on the GPU host a dry run models
    spent = time.monotonic() - t0 if host.here else Overheads().plan_s
    if args.frames == "auto" and not args.tiny:
        return size_frames(make, args.budget_s, spent_s=spent), predict, how
    plan = make(conf.workload.frames if args.frames == "auto" else args.frames)
    if plan.total_s() > args.budget_s - spent:
        raise PlanError(over_budget(plan, args.budget_s - spent, args.budget_s, spent_s=spent))
    return plan, predict, how


def plan_lines(
    plan: Plan, host: Host, how: list[str], predict: Predictor, budget_s: float, spent_s: float
) -> list[str]:
    """The plan as the dry run prints it: each stage's jobs and predicted times, the total, the notes."""
    lines = [
        f"[gpu_study] plan for {where(host)}, {host.threads} CPU threads; {plan.frames} frames per job; "
        f"predicted best actor count {plan.best_actors}"
    ]
    o = plan.overheads
    for stage, label in STAGES.items():
        if not plan.stage(stage):
            continue
        lines.append(f"  {label}: {plan.stage_s(stage):.0f} s (a sweep's start {o.sweep_start_s:.0f} s, estimate)")
        for j in plan.stage(stage):
            seconds = (
                f"reused: {j.reused}"
                if j.reused
                else (
                    f"predicted {j.seconds(o):.0f} s (task {j.runtime_s:.1f} s, bound {j.bound}; + {o.job_s:.0f} s "
                    "job start and end, estimate)"
                )
            )
            lines.append(f"    {j.name}: {seconds}")
    lines.append(f"  report and summary: {o.report_s:.0f} s (estimate)")
    planning = f"{spent_s:.0f} s of planning here" if host.here else f"{o.plan_s:.0f} s of planning there (estimate)"
    lines.append(f"  total predicted: {plan.total_s():.0f} s of the budget {budget_s:.0f} s, after {planning}")
    return lines + [f"  {line}" for line in how + predict.notes]


def check_jobs(base: list[str], plan: Plan) -> None:
    """Every planned job validated on this host before any runs (ConfigError naming what)."""
    for j in plan.jobs:
        compose_job(
            [
                *base,
                *job_overrides({"actors": j.actors, "sm_limit": j.sm_limit, "precision": j.precision}),
                f"workload.frames={plan.frames}",
            ]
        )
