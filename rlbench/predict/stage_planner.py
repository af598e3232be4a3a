"""A GPU study stage's plan on this host (pipelines/gpu_study.py --stage): its configurations at the
best actor count, each job's frames sized on this host's predictions, the warm-up, the start an
actors stage recorded; the parts of a stage no stay holds, or part 1's (--plan-from); the part a
command runs. Refusal (exit 2) before anything runs. `args` is the command's flags as parsed.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from rlbench.config.rules import ConfigError
from rlbench.core.errors import Refusal
from rlbench.predict.stage_lines import later_parts
from rlbench.predict.stage_plan import (
    FRAMES_MAX,
    FRAMES_STEP,
    PINNED_START,
    STAGE_ACTORS,
    Point,
    StageOverheads,
    StagePlan,
    parts_from_json,
    plan_stage,
    split_parts,
    stage_points,
)
from rlbench.predict.study_host import Host, check_host, where
from rlbench.predict.study_plan import PLAN_FILE, PlanError, sm_points
from rlbench.predict.study_predictor import Predictor, point_knobs, predictor_for, profiles_for
from rlbench.prepare.compose import compose_job
from rlbench.prepare.plan import envs_of

TINY_ACTORS = [4, 8]  # the rehearsal's actor counts
TINY_THREADS = (1, 2)  # a CPU host's cpu stage: actor_threads at every unit, and on as many units


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
            raise Refusal(
                f"--best-from={args.best_from}: its summary.json is not a finished actors stage's (no best "
                "actor count); allowed: the --out of an actors stage with a finished job, or --actors N"
            )
        return [int(best)], f"best actor count {best} (the actors stage's, {args.best_from}/summary.json)"
    if args.dry_run or args.tiny:
        best = predicted()
        return [best], f"best actor count {best}: predicted (a run on a GPU host needs --actors N or --best-from DIR)"
    raise Refusal(
        f"--stage={args.stage}: needs the best actor count; allowed: --actors N, or --best-from DIR "
        "(an actors stage's --out)"
    )


def make_stage_plan(args, host: Host, base: list[str], t0: float) -> tuple[StagePlan, Predictor, list[str]]:
    """The stage's configurations, each job's frames sized on this host's predictions, the warm-up."""
    units = sorted({host.units if s is None else s for s in sm_points(host.units, host.major)})
    candidates = TINY_ACTORS if args.tiny else list(STAGE_ACTORS)
    conf = compose_job([*base, f"actors={max(args.actors or candidates)}"], host=False)
    profiles, how = profiles_for(conf, host, None, units, args.actors or candidates)
    predict = predictor_for(base, profiles, host)

    def predicted() -> int:
        rate = {a: a / max(1e-9, predict.sized(Point(a), conf.workload.frames).runtime_s) for a in candidates}
        return max(rate, key=rate.get)

    def shelved(p: Point) -> bool:  # the shelf keeps envs whose batch divides them (envs/atari/vector_env.py)
        e = envs_of(predict.conf(point_knobs(p), FRAMES_STEP), host.threads)
        return e.total % e.inference_batch == 0

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
    plan = plan_stage(args.stage, points, predict.sized, fixed, o, left, shelved, measured, accepted_frames(base))
    plan.seed = int(conf.seed)
    return plan, predict, ([whence] if whence else []) + said + how


def accepted_frames(base: list[str]) -> Callable[[Point, int], int]:
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


def stage_parts(
    args, host: Host, base: list[str], t0: float, show: Callable[[list[StagePlan], list[str]], None]
) -> tuple[list[StagePlan], list[str]]:
    """The stage's parts: planned here, or as part 1 planned them (--plan-from); the notes the plan
    rests on. A plan no stay holds is shown (`show(parts, notes)`), then refused (PlanError)."""
    if args.plan_from is not None:
        data = json.loads((args.plan_from / PLAN_FILE).read_text())
        parts = parts_from_json(data)
        if parts[0].stage != args.stage or data.get("host") != where(host):
            raise Refusal(
                f"--plan-from={args.plan_from}: a plan of the {parts[0].stage} stage for {data.get('host')}; allowed: "
                f"the --out of part 1 of the {args.stage} stage on {where(host)}"
            )
        return parts, [f"the plan of {args.plan_from / PLAN_FILE} (its part 1's), not re-planned here"]
    whole, predict, how = make_stage_plan(args, host, base, t0)
    try:
        return split_parts(whole, args.budget_s, whole.seed), how + predict.notes
    except PlanError:  # no stay holds it: the plan as one, over the budget, then the refusal
        show([replace(whole, seed=None)], how + predict.notes)
        raise


def chosen_part(args, parts: list[StagePlan]) -> StagePlan:
    """The part this command runs: the stage where it is one; --part K/N where N is the plan's."""
    n, stage = len(parts), f"--stage={args.stage}"
    k, given = args.part or (1, None)
    if args.part and (k > n or given not in (None, n)):
        raise Refusal(
            f"--part={k}{'' if given is None else f'/{given}'}: the {args.stage} stage runs in {n} part(s) of "
            f"--budget-s={args.budget_s:g} here; allowed: "
            + (f"--part K or K/{n}, K in 1..{n}" if n > 1 else "--part 1")
        )
    if args.part and args.part[0] > 1 and args.plan_from is None and not args.dry_run:
        raise Refusal(
            f"--part={args.part[0]}: a later part runs the plan its part 1 made (the same frames and seeds); "
            "allowed: --plan-from DIR (part 1's --out, with its stage_plan.json)"
        )
    if n > 1 and not args.part and not args.dry_run:
        raise Refusal(
            f"{stage}: predicted over one stay of --budget-s={args.budget_s:g}, so it runs in {n} parts, one "
            f"per stay, and no job is cut; allowed: --part 1, then --part {later_parts(n)} with --plan-from "
            "(part 1's --out)"
        )
    plan = parts[k - 1]
    if plan.total_s() > args.budget_s:  # a plan made for a larger --budget-s (--plan-from)
        raise Refusal(
            f"--budget-s={args.budget_s:g}: part {k}/{n} is predicted at {plan.total_s():.0f} s, planned for a "
            f"larger stay, and no job is cut; allowed: --budget-s >= {math.ceil(plan.total_s())}"
        )
    return plan
