"""The study on a GPU host in one command, within a budget: the actor sweep (its Figure 3), the
SM sweep through green contexts at the sweep's best actor count (its Figure 4), fp32 against
bf16 there; then the report and a one-page summary, all under --out. docs/gpu.md.

    python pipelines/gpu_study.py --out results/h100            # a GPU host: stops itself by --budget-s (420)
    python pipelines/gpu_study.py --dry-run                     # any host: the jobs, their predicted times, the total
    python pipelines/gpu_study.py --tiny --out /tmp/rehearsal   # seconds-long CartPole jobs through the whole script
    python pipelines/gpu_study.py --stage actors --dry-run      # one stage (actors, sms, cpu): its plan and parts
    python pipelines/gpu_study.py --stage actors --part 1 --out r/a1                  # a stay: the stage's part 1
    python pipelines/gpu_study.py --stage actors --part 2 --plan-from r/a1 --out r/a2 # the next stay: part 2

A stage runs jobs of 20 learner updates and 20 s of steady windows; the actors, sms and cpu
stages do not fit one 420-s stay (the 4-actor job alone is about 150 s), so a stage over the
budget runs in parts, each a stay with its own idle power and warm-up, every job and repeat kept
and none cut (docs/gpu.md, "Stages").

Without --stage, the jobs' task is sized before any job runs: the largest frames of a ladder whose predicted total
fills at most 3/4 of the budget, predicted by rlbench.predict from this host's env stepping
(measured first, a few seconds) and the GPU's published peak (rlbench/predict/datasheet.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from rlbench.cli.command import Parser, preflight_or_exit
from rlbench.cli.run_and_report import ROOT, Sweep, merge, run_sweep
from rlbench.config.flags import number, writable_folder
from rlbench.config.rules import ConfigError
from rlbench.core import precision as precisions  # precisions.cpu_flags: a test's fake CPU flags replace it
from rlbench.core.precision import PRECISIONS, precision_problem, published_sms
from rlbench.core.resources import cuda_properties, green_context_problem, sm_granularity, usable_cpus
from rlbench.predict.curves import Profile
from rlbench.predict.datasheet import Flops, Gpu, notes, planning_profile, ratio_two_units
from rlbench.predict.jobs import JobPrediction, Machine, predict_job
from rlbench.predict.stage_plan import (
    FRAMES_MAX,
    FRAMES_STEP,
    JOB_END_S,
    MEASURED_START,
    MIN_STEADY_S,
    MIN_UPDATES,
    PINNED_START,
    STAGE_ACTORS,
    STAGE_NAMES,
    Point,
    Sized,
    StageOverheads,
    StagePlan,
    parts_from_json,
    parts_to_json,
    plan_stage,
    split_parts,
    stage_points,
)
from rlbench.predict.study_plan import (
    STAGES,
    Overheads,
    Plan,
    PlanError,
    build_plan,
    fit_stage,
    later_jobs,
    measured_overheads,
    over_budget,
    size_frames,
    sm_points,
)
from rlbench.prepare.compose import compose_job
from rlbench.prepare.plan import envs_of
from rlbench.prepare.validate import resolve_learner_updates

PROG = "pipelines/gpu_study.py"
EXPERIMENT = "gpu_study"  # + the host and the start time: one experiment per study, kept apart when merged
ACTORS = [4, 16, 40, 128, 256]
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
TINY_ACTORS = [4, 8]
TARGET_GPU, TARGET_THREADS = "NVIDIA H100 80GB HBM3", 16  # a dry run without a GPU models the lent H100 host
ENV_POINTS_MAX = 64  # env stepping is measured up to this many envs (flat beyond: rlbench.predict.curves)


class Refused(Exception):
    """Bad input or a host that cannot run the study: one line, exit 2, before any job."""


# --- the command line ---------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1 or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text}: allowed: distinct comma-separated integers >= 1, e.g. 4,16,40")
    return values


def _sm_limits(text: str) -> str | list[int | None]:
    if text in ("auto", "none"):
        return text
    try:
        values = [None if v.strip() == "all" else int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v is not None and v < 1 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(
            f"{text}: allowed: auto (all, half, a quarter, 16 and 8), none (no SM "
            "sweep), or distinct comma-separated SM counts >= 1 and all, e.g. all,64,16"
        )
    return values


def _part_flag(text: str) -> tuple[int, int | None]:
    k, slash, n = text.partition("/")
    if not (k.isdigit() and int(k) >= 1 and (not slash or n.isdigit() and int(k) <= int(n))):
        raise argparse.ArgumentTypeError(f"{text}: allowed: K or K/N with 1 <= K <= N, e.g. 1 or 1/2")
    return int(k), int(n) if slash else None


def _frames(text: str) -> str | int:
    if text == "auto":
        return text
    return number(int, lo=1, note="or auto: sized to the budget")(text)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="folder for the store (mlruns/), the report and summary.md")
    p.add_argument(
        "--budget-s",
        type=number(float, lo=0, lo_open=True),
        default=420.0,
        help="wall seconds the whole run may take; it stops itself before (default 420)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the jobs and their predicted times; run nothing")
    p.add_argument("--tiny", action="store_true", help="seconds-long CartPole jobs (actors 4,8): the rehearsal")
    p.add_argument(
        "--stage",
        choices=STAGE_NAMES,
        help="one stage in one process, its own stay on a GPU host: "
        'actors, sms or cpu (docs/gpu.md, "Stages"); without it, the whole study',
    )
    p.add_argument(
        "--repeats",
        type=number(int, lo=1),
        help="with --stage: runs per configuration (default: actors 2, sms 3 (8 SMs once), cpu 2)",
    )
    p.add_argument(
        "--part",
        type=_part_flag,
        help="with --stage: run part K (K/N: N checked) of a stage that does not fit one stay of --budget-s "
        "(the 20-update jobs of every stage do not fit 420 s): each part a stay with its own idle power and "
        "warm-up, every job and repeat kept, none cut; part 1 writes the parts to --out/stage_plan.json, "
        'later parts run it with --plan-from; the dry run lists them (docs/gpu.md, "Stages")',
    )
    p.add_argument(
        "--plan-from",
        type=Path,
        help="with --part K, K > 1: part 1's --out, whose stage_plan.json every later part runs (the same "
        "frames, split and seeds; nothing re-planned)",
    )
    p.add_argument(
        "--join",
        type=lambda t: [Path(d) for d in t.split(",") if d],
        help="with --stage and --out: DIR1,DIR2,...: the parts' --out folders, summarised as one stage "
        "(per configuration the median (min..max) over every part's runs, and the noise floor); runs nothing",
    )
    p.add_argument(
        "--best-from",
        type=Path,
        help="with --stage sms or cpu: an actors stage's --out, whose summary.json names the best actor count",
    )
    p.add_argument(
        "--actors",
        type=_ints,
        help="the actor sweep (default 4,16,40,128,256; --stage actors: "
        "4,40,128,256; --stage sms or cpu: the one best count)",
    )
    p.add_argument("--sm-limits", type=_sm_limits, default="auto", help="the SM sweep: auto, none or a list")
    p.add_argument(
        "--compare",
        choices=[p for p in PRECISIONS if p != "fp32"] + ["none"],
        default="bf16",
        help="the precision compared with fp32 at the best actor count (default bf16); none",
    )
    p.add_argument("--frames", type=_frames, default="auto", help="the task's frames per job (default auto)")
    p.add_argument("--gpu", help=f"dry run on a host without a GPU: the GPU modelled (default {TARGET_GPU})")
    p.add_argument("--host-threads", type=number(int, lo=1), help="dry run: the GPU host's hardware threads")
    p.add_argument("overrides", nargs="*", help="extra job overrides, e.g. env=breakout")
    args = p.parse_args(argv)
    if args.stage:
        stage_flags(p, args)
    if (args.part or args.plan_from) and not args.stage:
        p.error(
            f"--part/--plan-from: allowed: with --stage only (got --part={args.part}, --plan-from={args.plan_from})"
        )
    if not args.stage:
        args.actors = args.actors or (TINY_ACTORS if args.tiny else ACTORS)
    args.compare = None if args.compare == "none" else args.compare
    if args.out is None and not args.dry_run:
        p.error("--out: required (where the store, the report and the summary go); allowed: --out DIR, or --dry-run")
    if args.out is not None and (problem := writable_folder("--out", args.out) or _holds_store(args.out)):
        p.error(problem)
    args.out = args.out and args.out.resolve()  # before main() moves to the clone
    for flag in ("plan_from", "best_from"):
        setattr(args, flag, getattr(args, flag, None) and getattr(args, flag).resolve())
    args.join = args.join and [d.resolve() for d in args.join]
    return args


def stage_flags(p: Parser, args: argparse.Namespace) -> None:
    """The flags a stage reads, checked before anything runs (one line, exit 2)."""
    if args.stage == "actors" and args.repeats == 1 and not args.tiny:
        p.error("--repeats=1: the actors stage runs each actor count at least twice; allowed: an integer >= 2")
    if args.stage != "actors" and args.actors and len(args.actors) != 1:
        p.error(
            f"--actors={','.join(map(str, args.actors))}: --stage {args.stage} runs at the one best actor count; "
            "allowed: one integer >= 1, or --best-from DIR (an actors stage's --out)"
        )
    if args.best_from is not None and (args.stage == "actors" or args.actors):
        p.error(f"--best-from={args.best_from}: allowed: with --stage sms or cpu and without --actors")
    if args.best_from is not None and not (args.best_from / "summary.json").is_file():
        p.error(f"--best-from={args.best_from}: holds no summary.json; allowed: the --out of a finished actors stage")
    for d in args.join or []:
        if not (d / "summary.json").is_file() or not (d / "mlruns" / "mlflow.db").is_file():
            p.error(f"--join: {d} holds no summary.json and mlruns/; allowed: the --out folders of the stage's parts")
    if args.join and (args.part or args.plan_from or args.dry_run or args.out is None):
        p.error("--join: allowed: with --stage and --out only (it summarises parts that ran; it runs nothing)")
    if args.plan_from is not None and not (args.plan_from / PLAN_FILE).is_file():
        p.error(f"--plan-from={args.plan_from}: holds no {PLAN_FILE}; allowed: the --out of the stage's part 1")
    if args.plan_from is not None and (args.actors or args.best_from or not args.part):
        p.error(
            f"--plan-from={args.plan_from}: the plan names its jobs and parts; allowed: with --part K/N and "
            "without --actors or --best-from"
        )
    for flag in ("sm_limits", "frames"):
        if getattr(args, flag) != "auto":
            p.error(f"--{flag.replace('_', '-')}: the stages size these themselves; allowed: without --stage only")
    args.compare = "none"
    args.best_given = args.actors[0] if args.stage != "actors" and args.actors else None
    args.actors = (
        (args.actors or (TINY_ACTORS if args.tiny else list(STAGE_ACTORS))) if args.stage == "actors" else None
    )


def _holds_store(out: Path) -> str | None:
    db = out / "mlruns" / "mlflow.db"
    if db.exists():
        return (
            f"--out={out}: already holds a study's store ({db}); allowed: a new or empty folder "
            "(this run's jobs must not mix with another's)"
        )
    return None


# --- the host --------------------------------------------------------------------------------


@dataclass
class Host:
    device: str  # where the planned jobs run: cuda, or cpu (the rehearsal on a CPU)
    gpu: Gpu | None  # the GPU planned for: this host's, or --gpu's in a dry run without one
    units: int  # compute units the SM sweep divides: the GPU's SMs, or CPU threads
    threads: int  # the actors' host's hardware threads, as planned
    here: bool  # whether the jobs can run on this host (False: a dry run modelling another)
    tags: dict = field(default_factory=dict)  # this host's fingerprint

    @property
    def major(self) -> int | None:
        return self.gpu.major if self.gpu and self.device == "cuda" else None


def target_gpu(name: str) -> Gpu:
    found = published_sms(name)
    if found is None:
        raise Refused(
            f"--gpu={name}: no published SM count for it; allowed: a name containing H100, H200, A100, "
            "L40S, L4 or V100 (rlbench/core/precision.py)"
        )
    return Gpu(name, *found)


def probe(args, cuda_available: bool) -> Host:
    """The host the study plans for; Refused where this one cannot run it."""
    from rlbench.tracking.fingerprint import host_tags  # lazy: keeps torch, mlflow off a refusal's start

    tags, threads = host_tags(), len(usable_cpus())
    if (args.gpu or args.host_threads) and (cuda_available or not args.dry_run or args.tiny):
        raise Refused(
            f"--gpu/--host-threads: they model another host in a dry run; allowed: only with --dry-run "
            f"on a host without a CUDA device (this one has {'one' if cuda_available else 'none'})"
        )
    if cuda_available:
        props = cuda_properties(0)
        gpu = Gpu(props.name, props.multi_processor_count, props.major)
        return Host("cuda", gpu, gpu.sms, threads, True, tags)
    if args.tiny:
        return Host("cpu", None, threads, threads, True, tags)
    if args.dry_run:
        gpu = target_gpu(args.gpu or TARGET_GPU)
        return Host("cuda", gpu, gpu.sms, args.host_threads or TARGET_THREADS, False, tags)
    raise Refused(
        "no CUDA device on this host (torch.cuda.is_available() is False) and the study is for a GPU; "
        "allowed: --dry-run (the plan for --gpu), or --tiny (the rehearsal on this host's CPU)"
    )


def check_host(args, host: Host, sms: list[int | None]) -> None:
    """What the host must offer before any job: green contexts for the SM sweep, the compared precision."""
    if host.here and host.device == "cuda" and any(s is not None for s in sms):
        smallest = min(s for s in sms if s is not None)
        if why := green_context_problem(0, smallest):
            raise Refused(
                f"--sm-limits: {host.gpu.name} (compute capability {host.gpu.major}.x) gave no green "
                f"context: {why}; allowed: a driver of CUDA 12.4 or newer and a GPU of compute capability "
                ">= 6.0 with a torch that has torch.cuda.green_contexts, or --sm-limits none (the study "
                "without its SM sweep)"
            )
    if args.compare and host.here:
        name = host.gpu.name if host.gpu else "this CPU"
        if why := precision_problem(args.compare, host.device, name, precisions.cpu_flags(), host.major):
            raise Refused(f"--compare={args.compare}: {why}; or --compare none")


def resolve_sms(args, host: Host) -> list[int | None]:
    if args.sm_limits == "none":
        return [None]
    if args.sm_limits == "auto":
        return sm_points(host.units, host.major)
    too_many = [s for s in args.sm_limits if s is not None and s > host.units]
    if too_many:
        raise Refused(
            f"--sm-limits={','.join('all' if s is None else str(s) for s in args.sm_limits)}: "
            f"{too_many[0]} is more than the {host.units} units here; allowed: 1..{host.units} and all"
        )
    return [None] + [s for s in args.sm_limits if s is not None]


def half_units(host: Host) -> int:
    smallest, multiple = sm_granularity(host.major) if host.major is not None else (1, 1)
    return max(smallest, host.units // 2 // multiple * multiple)


# --- the prediction -----------------------------------------------------------------------


class Predictor:
    """`predict(knobs, frames)` for the plan: each job composed once (rlbench.prepare), at any
    frames, through rlbench.predict.jobs on the plan's profile of its precision."""

    def __init__(self, base: list[str], profiles: dict[str, Profile], threads: int | None):
        self.base, self.profiles, self.threads = base, profiles, threads
        self.confs: dict[tuple, object] = {}
        self.firsts: dict[Point, float] = {}
        self.notes: list[str] = []
        self.updates_given = any(o.startswith("workload.learner_updates=") for o in base)

    def conf(self, knobs: dict, frames: int):
        key = tuple(
            sorted(((k, v) for k, v in knobs.items() if v is not None or k != "actor_threads"), key=lambda kv: kv[0])
        )
        if key not in self.confs:
            self.confs[key] = compose_job([*self.base, *job_overrides(knobs)], host=False)
        c = copy.deepcopy(self.confs[key])
        c.workload.frames = frames
        return c if self.updates_given else resolve_learner_updates(c)

    def __call__(self, knobs: dict, frames: int) -> tuple[float, str]:
        p = self.job(knobs, frames)
        return p.runtime_s, p.bound

    def job(self, knobs: dict, frames: int) -> JobPrediction:
        profile = self.profiles.get(knobs["precision"])
        if profile is None:
            profile = self.profiles["fp32"]
            self.note(f"estimate: precision={knobs['precision']} predicted at fp32's costs (measured at fp32 only)")
        p = predict_job(self.conf(knobs, frames), Machine(profile, profile, self.threads))
        for n in p.notes:
            self.note(n)
        return p

    def sized(self, point: Point, frames: int) -> Sized:
        """A stage's job at `frames`: its task, its steady span, its updates, threads and units. The
        steady span: the actors' time less that of the smallest task that holds a first learner
        update (envs made and reset, replay filled, the first update done), an estimate."""
        p = self.job(_knobs(point), frames)
        first = self.first_update_s(point)
        return Sized(
            p.runtime_s,
            max(0.0, p.actors_s - first),
            p.learner_updates,
            p.bound,
            int(p.knobs["actor_threads"]),
            int(p.knobs["sm_limit"]),
        )

    def first_update_s(self, point: Point) -> float:
        """The actors' time of the smallest task (a multiple of FRAMES_STEP) with one learner update."""
        if point not in self.firsts:
            frames = FRAMES_STEP
            while (p := self.job(_knobs(point), frames)).learner_updates < 1 and frames < FRAMES_MAX:
                frames *= 2
            self.firsts[point] = p.actors_s
        return self.firsts[point]

    def note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)


def _knobs(point: Point) -> dict:
    return {
        "actors": point.actors,
        "sm_limit": point.sm_limit,
        "precision": "fp32",
        "actor_threads": point.actor_threads,
    }


def job_overrides(knobs: dict) -> list[str]:
    sm, threads = knobs.get("sm_limit"), knobs.get("actor_threads")
    return [
        f"actors={knobs['actors']}",
        f"sm_limit={'null' if sm is None else sm}",
        f"precision={knobs['precision']}",
        *([f"actor_threads={threads}"] if threads is not None else []),
    ]


def measured_env(conf, threads: int, actors: list[int]) -> list[dict]:
    """This host's env stepping at the sweep's actor counts (up to ENV_POINTS_MAX envs), on all its threads."""
    from rlbench.predict.measure import env_curve  # lazy: keeps torch, gymnasium off a refusal's start

    envs = sorted({a for a in actors if a <= ENV_POINTS_MAX} or {min(actors)})
    return env_curve(conf.env, [(threads, e) for e in envs], seconds=0.5)


def profiles_for(conf, host: Host, compare: str | None, units: list[int], actors: list[int]) -> tuple[dict, list[str]]:
    """precision -> the profile the plan reads, and the estimates it rests on: on a GPU (or a
    modelled one) env stepping measured here and the GPU from its datasheet; on a CPU (the
    rehearsal) env stepping, inference and the update all measured here."""
    from rlbench.predict.measure import (  # lazy: keeps torch off a refusal's start
        counted_flops,
        inference_curve,
        update_time,
    )

    here = len(usable_cpus())
    rows = measured_env(conf, here, actors)
    tags = host.tags | {"hardware_threads": here}
    if host.gpu is None:  # all units only: the model takes other unit counts from it, and says so
        inference = inference_curve(conf, sorted({1, max(actors)}), [max(units)], repeats=3)
        updates = [update_time(conf, max(units), repeats=1)] if conf.learner else []
        ptags = {
            "profile_device": "cpu",
            "env_id": conf.env.id,
            "hardware_threads": str(here),
            "host": tags.get("host", "?"),
            "cpu_model": tags.get("cpu_model", "?"),
        }
        profile = Profile("measured", ptags, rows, inference, updates, params={"algo.name": conf.algo.name})
        return {"fp32": profile}, ["measured here: env stepping, inference and the update on this CPU, just now"]
    flops = Flops(*counted_flops(conf))
    batches = [2**k for k in range(11)]
    out = {}
    for p in ["fp32"] + ([compare] if compare else []):
        c = copy.deepcopy(conf)
        c.precision = p
        out[p] = planning_profile(rows, tags, host.gpu, c, flops, units, batches)
    how = [f"measured here: env stepping of {', '.join(str(r['envs']) for r in rows)} envs on {here} threads"]
    return out, how + notes(host.gpu, list(out), flops)


def make_plan(args, host: Host, base: list[str], sms: list[int | None], t0: float) -> tuple[Plan, Predictor, list[str]]:
    conf = compose_job([*base, f"actors={max(args.actors)}"], host=False)
    units = sorted({host.units if s is None else s for s in sms})
    profiles, how = profiles_for(conf, host, args.compare, units, args.actors)
    threads = host.threads if host.threads != len(usable_cpus()) else None
    predict = Predictor(base, profiles, threads)

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


def print_plan(plan: Plan, host: Host, how: list[str], predict: Predictor, budget_s: float, spent_s: float) -> None:
    where = f"{host.gpu.name} ({host.units} SMs)" if host.gpu else f"this CPU ({host.units} threads)"
    print(
        f"[gpu_study] plan for {where}, {host.threads} CPU threads; {plan.frames} frames per job; "
        f"predicted best actor count {plan.best_actors}"
    )
    o = plan.overheads
    for stage, label in STAGES.items():
        if not plan.stage(stage):
            continue
        print(f"  {label}: {plan.stage_s(stage):.0f} s (a sweep's start {o.sweep_start_s:.0f} s, estimate)")
        for j in plan.stage(stage):
            seconds = (
                f"reused: {j.reused}"
                if j.reused
                else (
                    f"predicted {j.seconds(o):.0f} s (task {j.runtime_s:.1f} s, bound {j.bound}; + {o.job_s:.0f} s "
                    "job start and end, estimate)"
                )
            )
            print(f"    {j.name}: {seconds}")
    print(f"  report and summary: {o.report_s:.0f} s (estimate)")
    planning = f"{spent_s:.0f} s of planning here" if host.here else f"{o.plan_s:.0f} s of planning there (estimate)"
    print(f"  total predicted: {plan.total_s():.0f} s of the budget {budget_s:.0f} s, after {planning}")
    for line in how + predict.notes:
        print(f"  {line}")


# --- the run -------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
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
        "command": " ".join([PROG, *(r.args.argv or [])]),
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


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    args = parse(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    os.chdir(ROOT)
    import torch  # lazy: keeps torch off a flag refusal's start

    if args.stage and args.join:
        return join_parts(args)
    if args.stage:
        return stage_main(args, torch.cuda.is_available(), t0)
    try:
        host = probe(args, torch.cuda.is_available())
        sms = resolve_sms(args, host)
        check_host(args, host, sms)
        base = (TINY if args.tiny else TASK) + list(args.overrides)
        plan, predict, how = make_plan(args, host, base, sms, t0)
        if host.here and not args.dry_run:
            check_jobs(base, plan)
    except (Refused, PlanError, ConfigError, ValueError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    print_plan(plan, host, how, predict, args.budget_s, time.monotonic() - t0)
    if args.dry_run:
        return 0
    return run(args, host, plan, predict, base, sms, t0)


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


def run(args, host: Host, plan: Plan, predict: Predictor, base: list[str], sms: list, t0: float) -> int:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{out}/mlruns/mlflow.db"
    preflight_or_exit(uri, prog=PROG)
    (out / "plan.json").write_text(
        json.dumps(
            {
                "frames": plan.frames,
                "jobs": [asdict(j) for j in plan.jobs],
                "overheads": asdict(plan.overheads),
                "budget_s": args.budget_s,
                "notes": predict.notes,
            },
            indent=2,
        )
    )
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


# --- one stage (--stage): docs/gpu.md, "Stages" --------------------------------------------

PLAN_FILE = "stage_plan.json"  # under --out: the stage's parts, as the first part planned them
TINY_THREADS = (1, 2)  # a CPU host's cpu stage: actor_threads at every unit, and on as many units


def stage_host(args, cuda_available: bool) -> Host:
    """The host a stage plans for: a GPU; a dry run's modelled one; this CPU for --tiny or the CPU
    analogue (experiment=sm_sweep_cpu); Refused otherwise."""
    analogue = "experiment=sm_sweep_cpu" in args.overrides
    if not cuda_available and not (args.dry_run or args.tiny or analogue):
        why = ", so there are no SMs to limit" if args.stage == "sms" else ""
        raise Refused(
            f"--stage={args.stage}: no CUDA device on this host (torch.cuda.is_available() is False){why}; "
            "allowed: a GPU host, --dry-run (the plan for --gpu), --tiny (the rehearsal on this CPU), or "
            "experiment=sm_sweep_cpu (the CPU analogue: sm_limit caps CPU threads)"
        )
    if analogue and not cuda_available and not args.gpu:
        from rlbench.tracking.fingerprint import host_tags  # lazy: keeps torch, mlflow off a refusal's start

        threads = len(usable_cpus())
        return Host("cpu", None, threads, threads, True, host_tags())
    return probe(args, cuda_available)


def stage_best(args, predicted: Callable[[], int]) -> tuple[list[int], str]:
    """The actor counts of the stage: the actors stage's list, else the one best count (--actors,
    --best-from's summary.json, or in a dry run or rehearsal the predicted best) and whence it came."""
    if args.stage == "actors":
        return args.actors, ""
    if args.best_given:
        return [args.best_given], f"best actor count {args.best_given} (--actors)"
    if args.best_from is not None:
        s = json.loads((args.best_from / "summary.json").read_text())
        best = (s.get("best") or {}).get("actors") if s.get("stage") == "actors" else None
        if not best:
            raise Refused(
                f"--best-from={args.best_from}: its summary.json is not a finished actors stage's (no best "
                "actor count); allowed: the --out of an actors stage with a finished job, or --actors N"
            )
        return [int(best)], f"best actor count {best} (the actors stage's, {args.best_from}/summary.json)"
    if args.dry_run or args.tiny:
        best = predicted()
        return [best], f"best actor count {best}: predicted (a run on a GPU host needs --actors N or --best-from DIR)"
    raise Refused(
        f"--stage={args.stage}: needs the best actor count; allowed: --actors N, or --best-from DIR "
        "(an actors stage's --out)"
    )


def make_stage_plan(args, host: Host, base: list[str], t0: float) -> tuple[StagePlan, Predictor, list[str]]:
    """The stage's configurations, each job's frames sized on this host's predictions, the warm-up."""
    units = sorted({host.units if s is None else s for s in sm_points(host.units, host.major)})
    candidates = TINY_ACTORS if args.tiny else list(STAGE_ACTORS)
    conf = compose_job([*base, f"actors={max(args.actors or candidates)}"], host=False)
    profiles, how = profiles_for(conf, host, None, units, args.actors or candidates)
    predict = Predictor(base, profiles, host.threads if host.threads != len(usable_cpus()) else None)

    def predicted() -> int:
        rate = {a: a / max(1e-9, predict.sized(Point(a), conf.workload.frames).runtime_s) for a in candidates}
        return max(rate, key=rate.get)

    def lockstep(p: Point) -> bool:  # the shelf keeps only lock-step envs (envs/shelf.py)
        e = envs_of(predict.conf(_knobs(p), FRAMES_STEP), host.threads)
        return e.inference_batch >= e.total

    actors, whence = stage_best(args, predicted)
    # a CPU host (the rehearsal, the CPU analogue): actor_threads 1 and 2, and on as many units
    tiny = {"counts": TINY_THREADS, "pairs": TINY_THREADS} if args.tiny or host.gpu is None else {}
    repeats = args.repeats or (1 if args.tiny and args.stage != "actors" else None)
    points, left = stage_points(args.stage, actors, host.units, host.major, host.threads, repeats, **tiny)
    check_host(args, host, [p.sm_limit for p in points])
    spent = time.monotonic() - t0 if host.here else StageOverheads().plan_s
    o = StageOverheads(plan_s=spent, **({"install_s": 0.0} if args.tiny or host.gpu is None else {}))
    fixed = conf.workload.frames if args.tiny else None
    measured, said = recorded_start(args, actors[0])
    plan = plan_stage(args.stage, points, predict.sized, fixed, o, left, lockstep, measured, accepted_frames(base))
    plan.seed = int(conf.seed)
    return plan, predict, ([whence] if whence else []) + said + how


def accepted_frames(base: list[str]):
    """least_frames for plan_stage: from `frames` up in FRAMES_STEP, the fewest whose job's config
    validates (the algorithm's checks, e.g. every actor fills one sequence; not the host's)."""

    def least(p: Point, frames: int) -> int:
        for f in range(frames, FRAMES_MAX + 1, FRAMES_STEP):
            try:
                compose_job([*base, *p.overrides(), f"workload.frames={f}"], host=False)
                return f
            except ConfigError:
                continue
        return frames  # none up to FRAMES_MAX: the run's own check refuses it, naming the key

    return least


def recorded_start(args, actors: int) -> tuple[float | None, list[str]]:
    """A job's start and end at `actors` as the actors stage recorded it (--best-from's
    summary.json: the median of its runs' start_s there), and the line that says so; else None."""
    if args.best_from is None or args.stage == "actors":
        return None, []
    s = json.loads((args.best_from / "summary.json").read_text())
    name = f"actors={actors} sm_limit=all actor_threads=null"
    starts = [j["start_s"]["value"] for j in s.get("jobs", []) if j.get("name") == name and j["start_s"].get("value")]
    if not starts:
        return None, [f"no start recorded at {actors} actors in {args.best_from}: the H200's figures below"]
    median = statistics.median(starts)
    return median, [
        f"measured: a job's start and end at {actors} actors {median:.1f} s (the median of {len(starts)} runs "
        f"of the actors stage, {args.best_from}/summary.json), x{PINNED_START:.2f} where actor_threads pins"
    ]


def print_stage_plan(parts: list[StagePlan], host: Host, notes: list[str], budget_s: float) -> None:
    plan, o, n = parts[0], parts[0].overheads, len(parts)
    print(f"[gpu_study] stage {plan.stage} for {where(host)}, {host.threads} CPU threads, one process per stay:")
    print(
        f"  each stay: the install {o.install_s:.0f} s, the planning {o.plan_s:.0f} s, the process's start "
        f"{o.process_s:.0f} s, idle GPU power {o.idle_s:.0f} s, each run of rlbench's main() {o.sweep_s:.0f} s, "
        f'the summary {o.summary_s:.0f} s (docs/gpu.md, "Stages")'
    )
    if n > 1:
        whole = sum(r.runs_s() for r in parts)
        print(
            f"  the stage does not fit one stay of {budget_s:.0f} s ({whole:.0f} s of runs alone): {n} parts, "
            f"each a stay of its own with its own idle power and warm-up: --part 1/{n}, then --part "
            f"{later_parts(n)} with --plan-from (part 1's --out)"
        )
    for part in parts:
        print_part(part, host, n, budget_s)
    for line in plan.left_out:
        print(f"  left out: {line}")
    if plan.fixed_frames:
        print(
            f"  the rehearsal: every job at {plan.fixed_frames} frames, not sized to {MIN_STEADY_S:g} s of steady "
            f"windows and {MIN_UPDATES} learner updates (seconds-long CartPole jobs: the script, not a result)"
        )
    for line in notes + start_notes(parts):
        print(f"  {line}")


def later_parts(n: int) -> str:
    """The parts after the first, as the command line names them: 2/2, or 2/n .. n/n."""
    return f"2/{n}" if n == 2 else f"2/{n} .. {n}/{n}"


def print_part(plan: StagePlan, host: Host, n: int, budget_s: float) -> None:
    w, fits = plan.warmup, "fits" if plan.total_s() <= budget_s else "DOES NOT FIT: nothing runs"
    head = f"  part {plan.part[0]}/{n}:" if n > 1 else " "
    print(
        f"{head} warm-up (discarded, run `warmup`): {w.point.name}, {w.frames} frames, {w.sized.updates} updates: "
        f"predicted {w.seconds():.0f} s (task {w.sized.runtime_s:.1f} s; + {w.start_s:.0f} s start and end)"
    )
    for j in plan.jobs:
        z, later = j.sized, "" if j.then_s is None else f", later runs + {j.then_s:.0f} s (envs off the shelf)"
        seeds = f" ({plan._seeds(j.point)[0]})" if plan.seed is not None else ""
        print(
            f"    {j.point.name} x {j.point.repeats}{seeds}: {j.frames} frames, {z.updates} learner updates, steady "
            f"{z.steady_s:.0f} s: predicted {j.runs_s():.0f} s (task {z.runtime_s:.1f} s, bound {z.bound}; + "
            f"{j.start_s:.0f} s start and end{later}); ratio {ratio_text(host, z)}"
        )
    print(f"    total predicted {plan.total_s():.0f} s of the budget {budget_s:.0f} s: {fits}")


def start_notes(parts: list[StagePlan]) -> list[str]:
    """Where the plan's start and end figures come from."""
    shelf = any(j.lockstep for p in parts for j in p.jobs)
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
        else "the shelf keeps no env between these jobs: their central inference batches part of the envs "
        "(inference_batch -1, SEED's auto rule), and only lock-step envs are kept (docs/envs.md)",
    ]


def ratio_text(host: Host, z: Sized) -> str:
    """The job's CPU/GPU ratio in threads per SM and threads per fp32 TFLOP/s of its SMs."""
    if host.gpu is None:
        return f"{z.threads / z.units:.3g} threads per CPU thread of inference (no GPU)"
    r = ratio_two_units(z.threads, host.gpu, z.units)
    return f"{r['threads_per_sm']:.3g} threads/SM, {r['threads_per_fp32_tflops']:.3g} threads per fp32 TFLOP/s"


def stage_main(args, cuda_available: bool, t0: float) -> int:
    """--stage: refusals before anything runs, the plan (printed), then the stage (or the part
    --part names) and its summary."""
    base = (TINY if args.tiny else TASK) + list(args.overrides)
    try:
        host = stage_host(args, cuda_available)
        parts, notes = stage_parts(args, host, base, t0)
        print_stage_plan(parts, host, notes, args.budget_s)
        plan = chosen_part(args, parts)
        if host.here and not args.dry_run:
            for j in [plan.warmup, *plan.jobs]:
                compose_job([*base, *j.point.overrides(), f"workload.frames={j.frames}"])
    except (Refused, PlanError, ConfigError, ValueError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        plan_file = parts_to_json(parts, where(host))
        (args.out / PLAN_FILE).write_text(json.dumps(plan_file, indent=2, default=str))
    return 0 if args.dry_run else run_stage(args, host, plan, base, t0)


def where(host: Host) -> str:
    return f"{host.gpu.name} ({host.units} SMs)" if host.gpu else f"this CPU ({host.units} threads)"


def stage_parts(args, host: Host, base: list[str], t0: float) -> tuple[list[StagePlan], list[str]]:
    """The stage's parts: planned here, or as part 1 planned them (--plan-from); the notes the plan
    rests on. A plan no stay holds is printed, then refused (PlanError)."""
    if args.plan_from is not None:
        data = json.loads((args.plan_from / PLAN_FILE).read_text())
        parts = parts_from_json(data)
        if parts[0].stage != args.stage or data.get("host") != where(host):
            raise Refused(
                f"--plan-from={args.plan_from}: a plan of the {parts[0].stage} stage for {data.get('host')}; allowed: "
                f"the --out of part 1 of the {args.stage} stage on {where(host)}"
            )
        return parts, [f"the plan of {args.plan_from / PLAN_FILE} (its part 1's), not re-planned here"]
    whole, predict, how = make_stage_plan(args, host, base, t0)
    try:
        return split_parts(whole, args.budget_s, whole.seed), how + predict.notes
    except PlanError:  # no stay holds it: the plan as one, over the budget, then the refusal
        print_stage_plan([replace(whole, seed=None)], host, how + predict.notes, args.budget_s)
        raise


def chosen_part(args, parts: list[StagePlan]) -> StagePlan:
    """The part this command runs: the stage where it is one; --part K/N where N is the plan's."""
    n, stage = len(parts), f"--stage={args.stage}"
    k, given = args.part or (1, None)
    if args.part and (k > n or given not in (None, n)):
        raise Refused(
            f"--part={k}{'' if given is None else f'/{given}'}: the {args.stage} stage runs in {n} part(s) of "
            f"--budget-s={args.budget_s:g} here; allowed: "
            + (f"--part K or K/{n}, K in 1..{n}" if n > 1 else "--part 1")
        )
    if args.part and args.part[0] > 1 and args.plan_from is None and not args.dry_run:
        raise Refused(
            f"--part={args.part[0]}: a later part runs the plan its part 1 made (the same frames and seeds); "
            "allowed: --plan-from DIR (part 1's --out, with its stage_plan.json)"
        )
    if n > 1 and not args.part and not args.dry_run:
        raise Refused(
            f"{stage}: predicted over one stay of --budget-s={args.budget_s:g}, so it runs in {n} parts, one "
            f"per stay, and no job is cut; allowed: --part 1, then --part {later_parts(n)} with --plan-from "
            "(part 1's --out)"
        )
    plan = parts[k - 1]
    if plan.total_s() > args.budget_s:  # a plan made for a larger --budget-s (--plan-from)
        raise Refused(
            f"--budget-s={args.budget_s:g}: part {k}/{n} is predicted at {plan.total_s():.0f} s, planned for a "
            f"larger stay, and no job is cut; allowed: --budget-s >= {math.ceil(plan.total_s())}"
        )
    return plan


def run_stage(args, host: Host, plan: StagePlan, base: list[str], t0: float) -> int:
    """The stage's process (python -m rlbench.stage) within the budget, then its summary."""
    out, o = args.out, plan.overheads
    out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{out}/mlruns/mlflow.db"
    preflight_or_exit(uri, prog=PROG)
    k, n = plan.part
    part = f"-part{k}of{n}" if n > 1 else ""
    experiment = f"{EXPERIMENT}-{args.stage}{part}-{host.tags.get('host', 'host')}-{time.strftime('%Y%m%d-%H%M%S')}"
    # the stage's grids are its sweeps: an experiment preset's own grid (sm_sweep_cpu's sm_limit=2,1) is not
    common = merge(base, [f"tracking.uri={uri}", f"tracking.experiment={experiment}", "progress=log"])
    common.append("hydra.sweeper.params=null")
    spec = {
        "uri": uri,
        "experiment": experiment,
        "out": str(out),
        "idle_s": o.idle_s,
        "common": common,
        "warmup": [*plan.warmup.point.overrides(), f"workload.frames={plan.warmup.frames}"],
        "grids": plan.grids(),
    }
    (out / "stage.json").write_text(json.dumps(spec, indent=2))
    (out / "plan.json").write_text(
        json.dumps(asdict(plan) | {"total_s": plan.total_s(), "budget_s": args.budget_s}, indent=2, default=str)
    )
    limit = args.budget_s - o.install_s - (time.monotonic() - t0) - o.summary_s
    done = run_sweep([str(out / "stage.json")], timeout_s=max(1.0, limit), module="rlbench.stage", multirun=False)
    events = [f"stopped at the budget after {done.seconds:.0f} s; its finished jobs kept"] if done.stopped else []
    events += [f"the stage's process ended with exit {done.code}"] if done.code and not done.stopped else []
    task = f"{' '.join(base)}; frames per job as planned" + (f"; part {k}/{n} of the stage" if n > 1 else "")
    stage_finish(args, host, uri, experiment, events, t0, task)
    return 0 if done.code == 0 and not done.stopped else 1


def stage_finish(args, host: Host, uri: str, experiment: str, events: list[str], t0: float, task: str) -> None:
    """summary.json and summary.md from the stage's store."""
    from rlbench.report.stage_summary import stage_markdown, stage_summary  # lazy: keeps mlflow off the start
    from rlbench.tracking.store import use_store  # lazy: keeps mlflow off the start
    from rlbench.tracking.study_records import Study, load_experiment  # lazy: keeps mlflow off the start

    use_store(uri)
    try:
        study = load_experiment(experiment)
    except LookupError:
        study = Study("experiment", experiment, None, {}, [], [])
    idle_file = args.out / "idle_power.json"
    idle = (
        json.loads(idle_file.read_text())
        if idle_file.is_file()
        else {"value": None, "reason": "the stage's process wrote no idle power (it stopped before)"}
    )
    run = {
        "command": " ".join([PROG, *(args.argv or [])]),
        "experiment": experiment,
        "budget_s": args.budget_s,
        "used_s": time.monotonic() - t0,
        "task": task,
        "events": events,
    }
    s = stage_summary(args.stage, study, host.tags, idle, run)
    (args.out / "summary.json").write_text(json.dumps(s, indent=2, default=str))
    (args.out / "summary.md").write_text(stage_markdown(s))
    print((args.out / "summary.md").read_text())
    print(f"[gpu_study] written under {args.out}: mlruns/, summary.md, summary.json, plan.json, stage.json")


def join_parts(args) -> int:
    """--join: the parts' stores summarised as one stage under --out (summary.json, summary.md):
    refused (exit 2) where the parts are of another stage or another GPU."""
    from rlbench.report.stage_summary import stage_markdown, stage_summary  # lazy: keeps mlflow off the start
    from rlbench.tracking.store import use_store  # lazy: keeps mlflow off the start
    from rlbench.tracking.study_records import Study, load_experiment  # lazy: keeps mlflow off the start

    sums = [json.loads((d / "summary.json").read_text()) for d in args.join]
    kinds = {(s["stage"], s["fingerprint"].get("gpu_name", "no GPU")) for s in sums}
    if kinds != {(args.stage, sums[0]["fingerprint"].get("gpu_name", "no GPU"))}:
        print(
            f"{PROG}: --join: parts of {sorted(kinds)}; allowed: parts of the {args.stage} stage on one kind of GPU "
            "(never H100 numbers with H200 ones)",
            file=sys.stderr,
        )
        return 2
    studies, idle = [], [s["idle_power_gpu_w"] for s in sums]
    for d, s in zip(args.join, sums, strict=True):
        use_store(f"sqlite:///{d}/mlruns/mlflow.db")
        studies.append(load_experiment(s["run"]["experiment"]))
    watts = [i["value"] for i in idle if i.get("value") is not None]
    joined_idle = (
        {"value": statistics.median(watts), "parts": watts}
        if watts
        else {"value": None, "reason": "; ".join(sorted({i.get("reason", "?") for i in idle}))}
    )
    run = {
        "command": " ".join([PROG, *(args.argv or [])]),
        "experiment": ", ".join(s["run"]["experiment"] for s in sums),
        "budget_s": sums[0]["run"].get("budget_s"),
        "used_s": sum(s["run"].get("used_s") or 0 for s in sums),
        "task": sums[0]["run"].get("task", "").split("; part ")[0] + f"; {len(sums)} parts joined",
        "events": [f"{len(sums)} parts joined: {', '.join(map(str, args.join))}"]
        + [e for s in sums for e in s["run"]["events"]],
    }
    study = Study("experiment", run["experiment"], None, studies[0].host, [j for st in studies for j in st.jobs], [])
    out = stage_summary(args.stage, study, sums[0]["fingerprint"], joined_idle, run)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(out, indent=2, default=str))
    (args.out / "summary.md").write_text(stage_markdown(out))
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
