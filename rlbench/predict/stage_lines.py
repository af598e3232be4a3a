"""A GPU study stage's plan as its dry run prints it (pipelines/gpu_study.py --stage): each stay's
fixed costs, each part's warm-up and jobs with their frames, updates, predicted seconds and
CPU/GPU ratio in two units, and where the start figures come from. docs/gpu.md, "Stages".
"""

from __future__ import annotations

from rlbench.predict.datasheet import ratio_two_units
from rlbench.predict.stage_plan import (
    JOB_END_S,
    MEASURED_START,
    MIN_STEADY_S,
    MIN_UPDATES,
    PINNED_START,
    Sized,
    StagePlan,
)
from rlbench.predict.study_host import Host, where


def later_parts(n: int) -> str:
    """The parts after the first, as the command line names them: 2/2, or 2/n .. n/n."""
    return f"2/{n}" if n == 2 else f"2/{n} .. {n}/{n}"


def stage_plan_lines(parts: list[StagePlan], host: Host, notes: list[str], budget_s: float) -> list[str]:
    plan, o, n = parts[0], parts[0].overheads, len(parts)
    lines = [
        f"[gpu_study] stage {plan.stage} for {where(host)}, {host.threads} CPU threads, one process per stay:",
        f"  each stay: the install {o.install_s:.0f} s, the planning {o.plan_s:.0f} s, the process's start "
        f"{o.process_s:.0f} s, idle GPU power {o.idle_s:.0f} s, each run of rlbench's main() {o.sweep_s:.0f} s, "
        f'the summary {o.summary_s:.0f} s (docs/gpu.md, "Stages")',
    ]
    if n > 1:
        whole = sum(r.runs_s() for r in parts)
        lines.append(
            f"  the stage does not fit one stay of {budget_s:.0f} s ({whole:.0f} s of runs alone): {n} parts, "
            f"each a stay of its own with its own idle power and warm-up: --part 1/{n}, then --part "
            f"{later_parts(n)} with --plan-from (part 1's --out)"
        )
    for part in parts:
        lines += part_lines(part, host, n, budget_s)
    lines += [f"  left out: {line}" for line in plan.left_out]
    if plan.fixed_frames:
        lines.append(
            f"  the rehearsal: every job at {plan.fixed_frames} frames, not sized to {MIN_STEADY_S:g} s of steady "
            f"windows and {MIN_UPDATES} learner updates (seconds-long CartPole jobs: the script, not a result)"
        )
    return lines + [f"  {line}" for line in notes + start_notes(parts)]


def part_lines(plan: StagePlan, host: Host, n: int, budget_s: float) -> list[str]:
    w, fits = plan.warmup, "fits" if plan.total_s() <= budget_s else "DOES NOT FIT: nothing runs"
    head = f"  part {plan.part[0]}/{n}:" if n > 1 else " "
    lines = [
        f"{head} warm-up (discarded, run `warmup`): {w.point.name}, {w.frames} frames, {w.sized.updates} updates: "
        f"predicted {w.seconds():.0f} s (task {w.sized.runtime_s:.1f} s; + {w.start_s:.0f} s start and end)"
    ]
    for j in plan.jobs:
        z, later = j.sized, "" if j.then_s is None else f", later runs + {j.then_s:.0f} s (envs off the shelf)"
        seeds = f" ({plan._seeds(j.point)[0]})" if plan.seed is not None else ""
        lines.append(
            f"    {j.point.name} x {j.point.repeats}{seeds}: {j.frames} frames, {z.updates} learner updates, steady "
            f"{z.steady_s:.0f} s: predicted {j.runs_s():.0f} s (task {z.runtime_s:.1f} s, bound {z.bound}; + "
            f"{j.start_s:.0f} s start and end{later}); ratio {ratio_text(host, z)}"
        )
    return lines + [f"    total predicted {plan.total_s():.0f} s of the budget {budget_s:.0f} s: {fits}"]


def start_notes(parts: list[StagePlan]) -> list[str]:
    """Where the plan's start and end figures come from."""
    shelf = any(j.shelved for p in parts for j in p.jobs)
    table = (
        []
        if parts[0].measured_start_s is not None
        else [
            f"measured: a job's start on the H200 {', '.join(f'{s:g} s at {a}' for a, s in MEASURED_START)} actors "
            f"(docs/results.md); x{PINNED_START:.2f} where actor_threads pins the threads (measured at 128 actors); "
            f"+ {JOB_END_S:g} s for its end (estimate)"
        ]
    )
    return table + [
        "the shelf (envs/shelf.py): a later job of the same envs takes them, resets only (measured on the 2-core VM)"
        if shelf
        else "the shelf keeps no env between these jobs: their central inference's batch does not divide "
        "their envs, so steps stay in flight at a job's end (docs/envs.md)",
    ]


def ratio_text(host: Host, z: Sized) -> str:
    """The job's CPU/GPU ratio in threads per SM and threads per fp32 TFLOP/s of its SMs."""
    if host.gpu is None:
        return f"{z.threads / z.units:.3g} threads per CPU thread of inference (no GPU)"
    r = ratio_two_units(z.threads, host.gpu, z.units)
    return f"{r['threads_per_sm']:.3g} threads/SM, {r['threads_per_fp32_tflops']:.3g} threads per fp32 TFLOP/s"
