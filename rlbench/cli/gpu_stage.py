"""One GPU study stage (pipelines/gpu_study.py --stage): the plan and its parts
(rlbench/predict/stage_planner.py), printed; then the part this stay runs, in one process
(`python -m rlbench.stage`, rlbench/cli/stage.py) within the budget, and its summary; or (--join)
the parts' summaries as one stage. Refusals (typed errors) before anything runs. docs/gpu.md.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from rlbench.cli.gpu_study import EXPERIMENT, base_of, command_text, cuda_here, refused_values
from rlbench.cli.run_and_report import merge, run_sweep
from rlbench.predict.stage_lines import stage_plan_lines
from rlbench.predict.stage_plan import StagePlan, parts_to_json
from rlbench.predict.stage_planner import PLAN_FILE, chosen_part, stage_parts
from rlbench.predict.study_host import Host, stage_host, where
from rlbench.prepare import preflight
from rlbench.prepare.compose import compose_job


def main(args, t0: float) -> int:
    """--stage: refusals before anything runs, the plan (printed), then the stage (or the part
    --part names) and its summary; --join: the parts' summary."""
    cuda, base = cuda_here(), base_of(args)
    if args.join:
        return join_parts(args)
    with refused_values():
        host = stage_host(args, cuda)

        def show(parts: list[StagePlan], notes: list[str]) -> None:
            print("\n".join(stage_plan_lines(parts, host, notes, args.budget_s)))

        parts, notes = stage_parts(args, host, base, t0, show)
        show(parts, notes)
        plan = chosen_part(args, parts)
        if host.here and not args.dry_run:
            for j in [plan.warmup, *plan.jobs]:
                compose_job([*base, *j.point.overrides(), f"workload.frames={j.frames}"])
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        plan_file = parts_to_json(parts, where(host))
        (args.out / PLAN_FILE).write_text(json.dumps(plan_file, indent=2, default=str))
    return 0 if args.dry_run else run_stage(args, host, plan, base, t0)


def stage_spec(args, host: Host, plan: StagePlan, base: list[str], uri: str) -> dict:
    """What the stage's process runs (stage.json): its store and experiment, the idle power's
    seconds, the overrides every run shares, the warm-up's and each sweep's."""
    k, n = plan.part
    part = f"-part{k}of{n}" if n > 1 else ""
    experiment = f"{EXPERIMENT}-{args.stage}{part}-{host.tags.get('host', 'host')}-{time.strftime('%Y%m%d-%H%M%S')}"
    # the stage's grids are its sweeps: an experiment preset's own grid (sm_sweep_cpu's sm_limit=2,1) is not
    common = merge(base, [f"tracking.uri={uri}", f"tracking.experiment={experiment}", "progress=log"])
    common.append("hydra.sweeper.params=null")
    return {
        "uri": uri,
        "experiment": experiment,
        "out": str(args.out),
        "idle_s": plan.overheads.idle_s,
        "common": common,
        "warmup": [*plan.warmup.point.overrides(), f"workload.frames={plan.warmup.frames}"],
        "grids": plan.grids(),
    }


def run_stage(args, host: Host, plan: StagePlan, base: list[str], t0: float) -> int:
    """The stage's process (python -m rlbench.stage) within the budget, then its summary."""
    out, o = args.out, plan.overheads
    out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{out}/mlruns/mlflow.db"
    preflight.check(uri)  # PreflightError: one line, exit 2 before the stage's process starts
    spec = stage_spec(args, host, plan, base, uri)
    (out / "stage.json").write_text(json.dumps(spec, indent=2))
    (out / "plan.json").write_text(
        json.dumps(asdict(plan) | {"total_s": plan.total_s(), "budget_s": args.budget_s}, indent=2, default=str)
    )
    limit = args.budget_s - o.install_s - (time.monotonic() - t0) - o.summary_s
    done = run_sweep([str(out / "stage.json")], timeout_s=max(1.0, limit), module="rlbench.stage", multirun=False)
    events = [f"stopped at the budget after {done.seconds:.0f} s; its finished jobs kept"] if done.stopped else []
    events += [f"the stage's process ended with exit {done.code}"] if done.code and not done.stopped else []
    k, n = plan.part
    task = f"{' '.join(base)}; frames per job as planned" + (f"; part {k}/{n} of the stage" if n > 1 else "")
    stage_finish(args, host, uri, spec["experiment"], events, t0, task)
    return 0 if done.code == 0 and not done.stopped else 1


def stage_finish(args, host: Host, uri: str, experiment: str, events: list[str], t0: float, task: str) -> None:
    """summary.json and summary.md from the stage's store."""
    from rlbench.report.stage_record import stage_idle, stage_study, write_summary  # lazy: keeps mlflow off the start
    from rlbench.report.stage_summary import stage_summary  # lazy: keeps mlflow, matplotlib off the start

    run = {
        "command": command_text(args),
        "experiment": experiment,
        "budget_s": args.budget_s,
        "used_s": time.monotonic() - t0,
        "task": task,
        "events": events,
    }
    s = stage_summary(args.stage, stage_study(uri, experiment), host.tags, stage_idle(args.out), run)
    print(write_summary(args.out, s))
    print(f"[gpu_study] written under {args.out}: mlruns/, summary.md, summary.json, plan.json, stage.json")


def join_parts(args) -> int:
    """--join: the parts' stores summarised as one stage under --out (summary.json, summary.md):
    refused (exit 2) where the parts are of another stage or another GPU."""
    from rlbench.report.stage_record import joined_summary, write_summary  # lazy: keeps mlflow off the start

    print(write_summary(args.out, joined_summary(args.stage, args.join, command_text(args))))
    return 0
