"""The GPU study in one command within a budget (pipelines/gpu_study.py without --stage): the plan
(rlbench/predict/study_planner.py), then the actor sweep, the SM sweep and the precision
comparison as sweeps stopped at the budget, the report and the one-page summary under --out.
Refusals (typed errors) end through the pipeline's wrapper (cli/command.py). docs/gpu.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

from rlbench.cli.run_and_report import ROOT, Sweep, merge, run_sweep
from rlbench.core.errors import Refusal
from rlbench.predict.study_host import Host, check_host, half_units, probe, resolve_sms
from rlbench.predict.study_plan import STAGES, Plan, fit_stage, later_jobs, measured_overheads
from rlbench.predict.study_planner import check_jobs, make_plan, plan_lines
from rlbench.predict.study_predictor import Predictor
from rlbench.prepare import preflight

PROG = "pipelines/gpu_study.py"
EXPERIMENT = "gpu_study"  # + the host and the start time: one experiment per study, kept apart when merged
TASK = ["env=pong"]
# seconds-long CartPole jobs (tests/conftest.py's CARTPOLE_TINY at half its frames): the script, not a result
TINY = [
    "env=cartpole",
    "workload=smoke",
    "workload.frames=1500",
    "workload.learner_updates=2",
    "algo.min_replay=16",
    "eval_envs=0",
    "telemetry.rate_hz=2",
]


@contextlib.contextmanager
def refused_values() -> Iterator[None]:
    """While planning: a ValueError (PlanError, a plan file that is none, a model's bad value) is a
    refusal, exit 2 before any job; typed errors pass as they are."""
    try:
        yield
    except Refusal:
        raise
    except ValueError as e:
        raise Refusal(str(e)) from e


def cuda_here() -> bool:
    """Whether this host has a CUDA device; the clone made the working folder first (relative
    stores mean the same to the jobs and the summary)."""
    os.chdir(ROOT)
    import torch  # lazy: keeps torch off a flag refusal's start

    return torch.cuda.is_available()


def base_of(args) -> list[str]:
    """The jobs' task: Pong, or the rehearsal's CartPole; then the command line's overrides."""
    return (TINY if args.tiny else TASK) + list(args.overrides)


def command_text(args) -> str:
    return " ".join([PROG, *(args.argv or [])])


def main(args, t0: float) -> int:
    """The plan (printed), then on this host and without --dry-run the study: 0 when nothing was
    cut, stopped or failed, else 1."""
    cuda = cuda_here()
    with refused_values():
        host = probe(args, cuda)
        sms = resolve_sms(args, host)
        check_host(args, host, sms)
        base = base_of(args)
        plan, predict, how = make_plan(args, host, base, sms, t0)
        if host.here and not args.dry_run:
            check_jobs(base, plan)
    print("\n".join(plan_lines(plan, host, how, predict, args.budget_s, time.monotonic() - t0)))
    if args.dry_run:
        return 0
    return run(args, host, plan, predict, base, sms, t0)


@dataclass
class Run:
    args: object  # the command's flags
    host: Host
    plan: Plan
    predict: Predictor
    common: list[str]
    sms: list[int | None]
    task: str
    experiment: str
    t0: float
    events: list[str] = field(default_factory=list)
    troubles: int = 0  # jobs cut, stages stopped or failed, a report that failed

    def left_s(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.t0) - self.plan.overheads.report_s

    def stage(self, stage: str, jobs: list, axis: Callable[[list], list[str]]) -> Sweep | None:
        """Run the stage's jobs that fit the time left; the sweep is stopped at the budget."""
        kept, cut = fit_stage(jobs, self.left_s(), self.plan.overheads)
        for j in cut:
            self.events.append(
                f"cut before it started ({STAGES[stage]}): {j.name}, predicted "
                f"{j.seconds(self.plan.overheads):.0f} s with {max(0, self.left_s()):.0f} s left"
            )
        self.troubles += len(cut)
        if not kept:
            return None
        folder = f"hydra.sweep.dir={self.args.out}/multirun/{stage}"  # one per stage: job 0 of each is not overwritten
        sweep = run_sweep([*self.common, folder, *axis(kept)], timeout_s=max(1.0, self.left_s()))
        if sweep.stopped:
            self.events.append(
                f"stopped at the budget ({STAGES[stage]}) after {sweep.seconds:.0f} s; its finished jobs kept"
            )
        self.troubles += sweep.stopped or sweep.code != 0
        return sweep


def finished_runtimes(parent: str | None) -> dict[int, float]:
    """actors -> runtime_s of the sweep's finished jobs."""
    from rlbench.tracking.study_records import load_parent  # lazy: keeps mlflow off the start

    if parent is None:
        return {}
    return {j.actors: j.value("runtime_s") for j in load_parent(parent).finished if j.value("runtime_s") is not None}


def run_study(r: Run) -> dict:
    """The three stages in order, each re-planned from what the one before measured."""
    plan, args = r.plan, r.args
    first = r.stage("actors", plan.stage("actors"), lambda js: [f"actors={','.join(str(j.actors) for j in js)}"])
    measured = finished_runtimes(first.parent) if first else {}
    if not measured:
        r.events.append("no job of the actor sweep finished: the SM sweep and the precision comparison did not run")
        return {"best": None, "predicted": {j.name: j.runtime_s for j in plan.jobs}}
    best = min(measured, key=measured.get)
    predicted_best = max(1e-9, r.predict({"actors": best, "sm_limit": None, "precision": "fp32"}, plan.frames)[0])
    plan.overheads = measured_overheads(plan.overheads, first.seconds, list(measured.values()))
    later = later_jobs(best, r.sms, args.compare, plan.frames, r.predict, measured[best] / predicted_best)
    r.events.append(
        f"best actor count {best} (measured {measured[best]:.1f} s against {predicted_best:.1f} s "
        f"predicted): the later jobs re-predicted x{measured[best] / predicted_best:.2f}"
    )
    sms = [j for j in later if j.stage == "sms"]
    r.stage("sms", sms, lambda js: [f"actors={best}", "sm_limit=" + ",".join(str(j.sm_limit) for j in js)])
    if args.compare:
        r.stage(
            "precision",
            [j for j in later if j.stage == "precision"],
            lambda js: [f"actors={best}", f"precision={args.compare}"],
        )
    return {"best": best, "predicted": {j.name: j.runtime_s for j in plan.stage("actors") + later}}


def finish(r: Run, uri: str, result: dict) -> None:
    """The report over every job of the study, then summary.md and summary.json."""
    from rlbench.cli.report import main as report  # lazy: keeps matplotlib, mlflow off the start
    from rlbench.report.one_page import markdown, summary  # lazy: keeps matplotlib, mlflow off the start
    from rlbench.tracking.study_records import Study, load_experiment  # lazy: keeps mlflow off the start

    out = r.args.out
    try:
        study = load_experiment(r.experiment)
    except LookupError:  # no sweep opened the experiment
        study = Study("experiment", r.experiment, None, {}, [], [])
    if study.finished:
        try:
            code = report(["--experiment", r.experiment, "--tracking-uri", uri, "--out", str(out / "report")])
        except Exception as e:  # noqa: BLE001 - the summary is written whatever broke the report
            code = f"{type(e).__name__}: {e}"
        if code != 0:
            r.events.append(f"the report failed ({code}); the summary is made from the store")
            r.troubles += 1
    else:
        r.events.append("no job finished: no report")
    half = half_units(r.host)
    run = {
        "command": command_text(r.args),
        "experiment": r.experiment,
        "budget_s": r.args.budget_s,
        "used_s": time.monotonic() - r.t0,
        "task": r.task,
        "events": r.events,
    }
    s = summary(
        study, r.host.tags, result["best"], half if half in r.sms else None, r.args.compare, result["predicted"], run
    )
    (out / "summary.json").write_text(json.dumps(s, indent=2, default=str))
    (out / "summary.md").write_text(markdown(s))
    print((out / "summary.md").read_text())
    print(f"[gpu_study] written under {out}: mlruns/ (the store), report/, summary.md, summary.json, plan.json")


def run(args, host: Host, plan: Plan, predict: Predictor, base: list[str], sms: list, t0: float) -> int:
    """The study's sweeps in its own store under --out, then the report and the summary."""
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{out}/mlruns/mlflow.db"
    preflight.check(uri)  # PreflightError: one line, exit 2 before any job
    plan_file = {
        "frames": plan.frames,
        "jobs": [asdict(j) for j in plan.jobs],
        "overheads": asdict(plan.overheads),
        "budget_s": args.budget_s,
        "notes": predict.notes,
    }
    (out / "plan.json").write_text(json.dumps(plan_file, indent=2))
    experiment = f"{EXPERIMENT}-{host.tags.get('host', 'host')}-{time.strftime('%Y%m%d-%H%M%S')}"
    common = merge(
        base,
        [f"workload.frames={plan.frames}", f"tracking.uri={uri}", f"tracking.experiment={experiment}", "progress=log"],
    )
    r = Run(args, host, plan, predict, common, sms, f"{' '.join(base)}, {plan.frames} frames per job", experiment, t0)
    from rlbench.tracking.store import use_store  # lazy: keeps mlflow off the start

    use_store(uri)
    finish(r, uri, run_study(r))
    return 1 if r.troubles else 0
