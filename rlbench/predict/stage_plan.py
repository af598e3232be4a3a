"""The GPU study's stages (pipelines/gpu_study.py --stage): each stage's configurations and
repeats, each job's frames sized to 20 s of steady windows and 20 learner updates from the
plan's predictions, a discarded warm-up first, and a budget that holds the whole plan or
refuses it before any job (no job is cut for its length). Pure; docs/gpu.md, "Stages".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from rlbench.core.resources import sm_granularity
from rlbench.predict.study_plan import PlanError

STAGE_NAMES = ("actors", "sms", "cpu")
STAGE_ACTORS = (4, 40, 128, 256)
MIN_STEADY_S, MIN_UPDATES, WARMUP_UPDATES = 20.0, 20, 2
FRAMES_STEP = 10_000
FRAMES_MAX = 50_000_000


@dataclass(frozen=True)
class Point:
    """One configuration of a stage and its runs. sm_limit None: every unit; actor_threads None: null."""

    actors: int
    sm_limit: int | None = None
    actor_threads: int | None = None
    repeats: int = 1

    @property
    def name(self) -> str:
        sm = "all" if self.sm_limit is None else str(self.sm_limit)
        threads = "null" if self.actor_threads is None else str(self.actor_threads)
        return f"actors={self.actors} sm_limit={sm} actor_threads={threads}"

    def overrides(self) -> list[str]:
        none = "null"
        return [
            f"actors={self.actors}",
            f"sm_limit={none if self.sm_limit is None else self.sm_limit}",
            f"actor_threads={none if self.actor_threads is None else self.actor_threads}",
        ]


def _grantable(want: int, units: int, major: int | None, below: bool = True) -> int | None:
    """`want` rounded down to a green context's grant (CPU threads: any count), kept where it is
    at least the smallest grant and below `units` (or at most `units`, below=False)."""
    smallest, multiple = sm_granularity(major) if major is not None else (1, 1)
    v = want // multiple * multiple
    return v if smallest <= v and (v < units if below else v <= units) else None


def stage_points(
    stage: str,
    actors: list[int],
    units: int,
    major: int | None,
    threads: int,
    repeats: int | None = None,
    counts: tuple[int, ...] = (4, 8, 16),
    pairs: tuple[int, ...] = (8, 16),
) -> tuple[list[Point], list[str]]:
    """(the stage's configurations, what was left out and why). actors: the counts (stage actors)
    or the one best count (sms, cpu); units: the GPU's SMs (or CPU threads); threads: the host's;
    counts, pairs: the cpu stage's actor_threads at every unit, and on as many units."""
    if stage == "actors":
        return [Point(a, repeats=repeats or 2) for a in actors], []
    best, r, left = actors[0], repeats or (3 if stage == "sms" else 2), []
    if stage == "sms":
        points = [Point(best, repeats=r)]
        for want, n in ((units // 2, r), (16, r), (8, 1)):
            sm = _grantable(want, units, major)
            if sm is None or any(p.sm_limit == sm for p in points):
                left.append(f"sm_limit={want}: not a green context's grant below the {units} units here, or already in")
            else:
                points.append(Point(best, sm, repeats=n))
        return points, left
    points = [Point(best, None, None, r)]  # null: not pinned (the question docs/results.md left open)
    for t in counts:
        (
            points.append(Point(best, None, t, r))
            if t <= threads
            else left.append(f"actor_threads={t}: more than the {threads} hardware threads here")
        )
    for t in pairs:  # the same ratio: t threads on t units
        ok = t <= threads and _grantable(t, units, major, below=False) == t
        (
            points.append(Point(best, t, t, r))
            if ok
            else left.append(f"actor_threads={t} with sm_limit={t}: not {t} threads and a {t}-unit grant here")
        )
    return points, left


def _values(vs: list) -> str:
    return ",".join("null" if v is None else str(v) for v in dict.fromkeys(vs))


def grid_groups(points: list[Point]) -> list[tuple[list[Point], bool]]:
    """The points as groups one Hydra grid runs (points, whether they are same-ratio pairs), in
    order: one group per actor count and repeat count, the pairs apart (their sm_limit follows
    actor_threads)."""
    groups: dict[tuple, list[Point]] = {}
    for p in points:
        pair = p.sm_limit is not None and p.sm_limit == p.actor_threads
        groups.setdefault((p.actors, p.repeats, pair), []).append(p)
    return [(ps, pair) for (_, _, pair), ps in groups.items()]


def grid_overrides(ps: list[Point], pair: bool) -> list[list[str]]:
    """One group's overrides: one grid where the product of its knobs is exactly its points
    (the pairs: `'sm_limit=${actor_threads}'`), else one per point."""
    actors, sms, threads = (_values([getattr(p, k) for p in ps]) for k in ("actors", "sm_limit", "actor_threads"))
    if pair:
        return [[f"actors={actors}", f"actor_threads={threads}", "sm_limit=${actor_threads}"]]
    if math.prod(len(v.split(",")) for v in (actors, sms, threads)) == len(ps):
        return [[f"actors={actors}", f"sm_limit={sms}", f"actor_threads={threads}"]]
    return [p.overrides() for p in ps]


@dataclass
class Sized:
    """The model's answer for one job at some frames (rlbench.predict.jobs)."""

    runtime_s: float
    steady_s: float  # seconds the actors and the learner both run: the steady windows' span
    updates: int
    bound: str = ""
    threads: int = 0  # the actor threads the job plans (its cpu_gpu_ratio's numerator)
    units: int = 0  # the compute units it is granted


@dataclass
class StageJob:
    point: Point
    frames: int
    sized: Sized
    start_s: float  # the job's own start and end around its task (estimate)
    warmup: bool = False

    def seconds(self) -> float:
        """One run: its start and end, and its task."""
        return self.start_s + self.sized.runtime_s


def job_start_s(actors: int) -> float:
    """A job's start and end around its task, estimated: 8 s plus 0.1 s per actor (ale-py makes
    and resets its emulators one after another; measured 8-59 s on the H200, docs/gpu.md)."""
    return 8.0 + 0.1 * actors


def size_frames(
    sized_at: Callable[[int], Sized],
    min_steady_s: float = MIN_STEADY_S,
    min_updates: int = MIN_UPDATES,
    step: int = FRAMES_STEP,
) -> int:
    """The fewest frames (a multiple of `step`) whose predicted job has at least `min_steady_s`
    of steady windows and `min_updates` learner updates; PlanError past FRAMES_MAX."""

    def enough(f: int) -> bool:
        s = sized_at(f)
        return s.steady_s >= min_steady_s and s.updates >= min_updates

    hi = step
    while not enough(hi):
        if hi >= FRAMES_MAX:
            raise PlanError(
                f"no task up to {FRAMES_MAX} frames is predicted to hold {min_steady_s:g} s of steady "
                f"windows and {min_updates} learner updates"
            )
        hi *= 2
    lo = hi // 2 if hi > step else 0  # lo does not hold it (or is 0)
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step  # strictly between: both are multiples of step
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class StageOverheads:
    """Seconds outside the jobs' runs (estimates): the install before the command, the planning
    on the GPU host, the stage process's start (Python, torch, MLflow, CUDA), the idle power, each
    sweep's own start in that process, and the summary."""

    install_s: float = 45.0
    plan_s: float = 30.0
    process_s: float = 25.0
    idle_s: float = 10.0
    sweep_s: float = 5.0
    summary_s: float = 15.0


@dataclass
class StagePlan:
    stage: str
    warmup: StageJob
    jobs: list[StageJob]
    overheads: StageOverheads = field(default_factory=StageOverheads)
    left_out: list[str] = field(default_factory=list)
    fixed_frames: int | None = None  # the rehearsal's: every job at these frames, not sized

    def grids(self) -> list[list[str]]:
        """The sweeps the stage's process runs after its warm-up, each `python -m rlbench -m` overrides."""
        frames = {j.point: j.frames for j in self.jobs}
        return [
            [*g, f"workload.frames={frames[ps[0]]}", f"repeats={ps[0].repeats}"]
            for ps, pair in grid_groups([j.point for j in self.jobs])
            for g in grid_overrides(ps, pair)
        ]

    def sweeps(self) -> int:
        """The runs of rlbench's main() the stage's process makes: the warm-up, then each grid."""
        return 1 + len(self.grids())

    def runs_s(self) -> float:
        return sum(j.seconds() * j.point.repeats for j in self.jobs)

    def total_s(self) -> float:
        o = self.overheads
        return (
            o.install_s
            + o.plan_s
            + o.process_s
            + o.idle_s
            + self.sweeps() * o.sweep_s
            + self.warmup.seconds()
            + self.runs_s()
            + o.summary_s
        )

    def smallest_s(self) -> float:
        """One warm-up and the shortest job once, with every fixed cost: below it nothing can run."""
        o = self.overheads
        return (
            o.install_s
            + o.plan_s
            + o.process_s
            + o.idle_s
            + 2 * o.sweep_s
            + self.warmup.seconds()
            + min(j.seconds() for j in self.jobs)
            + o.summary_s
        )


def check_budget(plan: StagePlan, budget_s: float) -> None:
    """PlanError when the budget cannot hold the plan (nothing is cut): the budget that would, and
    the flags that shrink the plan; a distinct one when it cannot hold one warm-up and one job."""
    need = math.ceil(plan.total_s())
    if budget_s < plan.smallest_s():
        raise PlanError(
            f"--budget-s={budget_s:g}: too small for one warm-up and one job of the {plan.stage} stage "
            f"(predicted {plan.smallest_s():.0f} s with the install and the start); allowed: "
            f"--budget-s >= {need} for the whole stage"
        )
    if plan.total_s() > budget_s:
        longest = max(plan.jobs, key=lambda j: j.seconds() * j.point.repeats)
        fewer = "fewer actor counts (--actors)" if plan.stage == "actors" else "fewer --repeats"
        raise PlanError(
            f"--budget-s={budget_s:g}: the {plan.stage} stage is predicted at {need} s (its longest: "
            f"{longest.point.name}, {longest.point.repeats} x {longest.seconds():.0f} s) and no job is cut "
            f"for its length; allowed: --budget-s >= {need}, or {fewer}"
        )


def plan_stage(
    stage: str,
    points: list[Point],
    sized_at: Callable[[Point, int], Sized],
    fixed_frames: int | None = None,
    overheads: StageOverheads = StageOverheads(),
    left_out: list[str] | None = None,
) -> StagePlan:
    """Each grid's frames: the most any of its points needs (size_frames), or `fixed_frames` (the
    rehearsal); every job predicted there. The warm-up: the first point at the fewest frames that
    hold WARMUP_UPDATES learner updates."""
    frames: dict[Point, int] = {}
    for ps, _ in grid_groups(points):
        f = fixed_frames or max(size_frames(lambda n, p=p: sized_at(p, n)) for p in ps)
        frames |= dict.fromkeys(ps, f)
    jobs = [StageJob(p, frames[p], sized_at(p, frames[p]), job_start_s(p.actors)) for p in points]
    w = points[0]
    wf = fixed_frames or size_frames(lambda n: sized_at(w, n), min_steady_s=0.0, min_updates=WARMUP_UPDATES)
    warm = StageJob(w, wf, sized_at(w, wf), job_start_s(w.actors), warmup=True)
    return StagePlan(stage, warm, jobs, overheads, list(left_out or []), fixed_frames)
