"""The GPU study's stages (pipelines/gpu_study.py --stage): each stage's configurations and
repeats, each job's frames sized to 20 s of steady windows and 20 learner updates, starts from
the H200's measured figures, a discarded warm-up first; a stage the budget cannot hold in one
stay is split into parts, each a stay of its own (no job is cut). Pure; docs/gpu.md, "Stages".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from rlbench.core.resources import sm_granularity
from rlbench.envs.shelf import MAX_ENVS
from rlbench.predict.study_plan import PlanError
from rlbench.prepare.grid import SEED_STRIDE

STAGE_NAMES = ("actors", "sms", "cpu")
STAGE_ACTORS = (4, 40, 128, 256)
MIN_STEADY_S, MIN_UPDATES, WARMUP_UPDATES = 20.0, 20, 2
FRAMES_STEP = 10_000
FRAMES_MAX = 50_000_000
# A job's start, run created to its first progress line, on the H200 (docs/results.md, "The study
# on a GPU"): 8 s at 4 actors, 14-20 s at 128, 25-29 s at 256; the upper end of each range
MEASURED_START = ((4, 8.0), (128, 20.0), (256, 29.0))
PINNED_START = 38.0 / 20.0  # pinned actor threads at 128 actors started in 21-38 s (the cpu stage, H200)
JOB_END_S = 2.0  # a job's end after its task (final metrics, closing): an estimate, not measured
# a later job of the same spec whose envs came off the shelf (envs/shelf.py): resets only;
# measured on the 2-core VM (docs/results.md, "A job's start"), not on a GPU host
REUSED_START = ((4, 0.49), (40, 1.17), (256, 13.6))


@dataclass(frozen=True)
class Point:
    """One configuration of a stage and its runs. sm_limit None: every unit; actor_threads None: null."""

    actors: int
    sm_limit: int | None = None
    actor_threads: int | None = None
    repeats: int = 1
    first_repeat: int = 0  # a part's share of the repeats starts here (its seeds: repeat k's)

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
        groups.setdefault((p.actors, p.repeats, p.first_repeat, pair), []).append(p)
    return [(ps, pair) for (*_, pair), ps in groups.items()]


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
    start_s: float  # the first run's start and end around its task (docs/gpu.md, "Stages")
    warmup: bool = False
    shelved: bool = False  # its batch divides its envs: the shelf keeps them for a later job of its spec
    then_s: float | None = None  # a later run's start and end (None: as the first's)

    def seconds(self) -> float:
        """One run: its start and end, and its task."""
        return self.start_s + self.sized.runtime_s

    def runs_s(self) -> float:
        later = self.start_s if self.then_s is None else self.then_s
        return self.seconds() + (self.point.repeats - 1) * (later + self.sized.runtime_s)


def _between(table: tuple[tuple[int, float], ...], x: int) -> float:
    """Linear between a table's points, on the last two points' slope beyond, the first below."""
    (x0, y0), (x1, y1) = next(((a, b) for a, b in zip(table, table[1:], strict=False) if x <= b[0]), table[-2:])
    return max(table[0][1], y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def job_start_s(actors: int, pinned: bool = False) -> float:
    """A new job's start and end around its task: the H200's measured start at this actor count
    (MEASURED_START, x PINNED_START where actor_threads pins the threads) and JOB_END_S."""
    return _between(MEASURED_START, actors) * (PINNED_START if pinned else 1.0) + JOB_END_S


def reused_start_s(actors: int) -> float:
    """A job whose envs came off the shelf: their resets (REUSED_START) and JOB_END_S."""
    return _between(REUSED_START, actors) + JOB_END_S


def _spec(p: Point) -> tuple:
    """The shelf's key (envs/shelf.py), as far as a stage varies it: the envs and their threads."""
    return (p.actors, p.actor_threads)


def with_starts(
    warmup: StageJob, jobs: list[StageJob], measured_s: float | None = None
) -> tuple[StageJob, list[StageJob]]:
    """Each run's start in one process, in the order it runs them (the warm-up, then each job's
    runs): new envs (job_start_s, or `measured_s`: a record's start and end at the stage's one
    actor count), or the shelf's where a run before it had the same spec (actors, actor threads),
    the shelf keeps its envs (shelved) and every spec of the process fits on the shelf."""
    fits = sum(a for a, _ in {_spec(j.point) for j in [warmup, *jobs]}) <= MAX_ENVS
    seen: set = set()

    def start(j: StageJob) -> float:
        again = j.shelved and fits and _spec(j.point) in seen
        seen.add(_spec(j.point))
        pinned = j.point.actor_threads is not None
        if again:
            return reused_start_s(j.point.actors)
        return (
            job_start_s(j.point.actors, pinned) if measured_s is None else measured_s * (PINNED_START if pinned else 1)
        )

    w = replace(warmup, start_s=start(warmup))
    out = []
    for j in jobs:
        first = start(j)
        then = start(j) if j.point.repeats > 1 else first
        out.append(replace(j, start_s=first, then_s=None if then == first else then))
    return w, out


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
    """Seconds of a stay outside the jobs' runs: the install before the command (about 60 s on the
    last H200 stays; 6-25 s recorded before), the planning, the stage process's start (Python, torch, MLflow, CUDA), the
    idle power, each sweep's own start in that process, and the summary. The four measured on the
    2-core VM's rehearsal (14-18, 3.4, 1 and 5 s) and rounded up for CUDA: estimates there."""

    install_s: float = 60.0
    plan_s: float = 20.0
    process_s: float = 10.0
    idle_s: float = 10.0
    sweep_s: float = 2.0
    summary_s: float = 10.0


@dataclass
class StagePlan:
    stage: str
    warmup: StageJob
    jobs: list[StageJob]
    overheads: StageOverheads = field(default_factory=StageOverheads)
    left_out: list[str] = field(default_factory=list)
    fixed_frames: int | None = None  # the rehearsal's: every job at these frames, not sized
    part: tuple[int, int] = (1, 1)  # this part of the stage's (k, n): each part a stay of its own
    seed: int | None = None  # the stage's first seed: a part's grids name their repeats' seeds
    measured_start_s: float | None = None  # a record's start and end at the stage's one actor count

    def grids(self) -> list[list[str]]:
        """The sweeps the stage's process runs after its warm-up, each `python -m rlbench -m` overrides."""
        frames = {j.point: j.frames for j in self.jobs}
        return [
            [*g, f"workload.frames={frames[ps[0]]}", f"repeats={ps[0].repeats}", *self._seeds(ps[0])]
            for ps, pair in grid_groups([j.point for j in self.jobs])
            for g in grid_overrides(ps, pair)
        ]

    def _seeds(self, p: Point) -> list[str]:
        """A part's runs take the seeds the stage's repeats would (rlbench/prepare/grid.py)."""
        if self.seed is None:
            return []
        k = range(p.first_repeat, p.first_repeat + p.repeats)
        return ["seed=" + ",".join(str(self.seed + i * SEED_STRIDE) for i in k)]

    def sweeps(self) -> int:
        """The runs of rlbench's main() the stage's process makes: the warm-up, then each grid."""
        return 1 + len(self.grids())

    def runs_s(self) -> float:
        return sum(j.runs_s() for j in self.jobs)

    def fixed_s(self) -> float:
        """Every second outside the measured jobs: the stay's install, planning, process, idle power,
        each sweep's start, the warm-up and the summary."""
        o = self.overheads
        fixed = o.install_s + o.plan_s + o.process_s + o.idle_s + o.summary_s
        return fixed + self.sweeps() * o.sweep_s + self.warmup.seconds()

    def total_s(self) -> float:
        return self.fixed_s() + self.runs_s()

    def smallest_s(self) -> float:
        """One warm-up and the shortest job once, with every fixed cost: below it nothing can run."""
        o = self.overheads
        fixed = o.install_s + o.plan_s + o.process_s + o.idle_s + o.summary_s + 2 * o.sweep_s
        return fixed + self.warmup.seconds() + min(j.seconds() for j in self.jobs)


def check_budget(plan: StagePlan, budget_s: float) -> None:
    """PlanError where no stay of `budget_s` can hold one warm-up and the shortest job, or the
    longest job once (nothing is cut for its length): the budget that would. A plan over the
    budget otherwise runs in parts (split_parts)."""
    if budget_s < plan.smallest_s():
        raise PlanError(
            f"--budget-s={budget_s:g}: too small for one warm-up and one job of the {plan.stage} stage "
            f"(predicted {plan.smallest_s():.0f} s with the install and the start); allowed: "
            f"--budget-s >= {math.ceil(plan.smallest_s())}"
        )
    longest = max(plan.jobs, key=lambda j: j.seconds())
    alone = replace(plan, jobs=[replace(longest, point=replace(longest.point, repeats=1))])
    if alone.total_s() > budget_s:
        raise PlanError(
            f"--budget-s={budget_s:g}: the {plan.stage} stage's longest job, {longest.point.name}, is predicted "
            f"at {longest.seconds():.0f} s: {alone.total_s():.0f} s with a stay's warm-up and fixed costs, and "
            f"no job is cut for its length; allowed: --budget-s >= {math.ceil(alone.total_s())}"
        )


def plan_stage(
    stage: str,
    points: list[Point],
    sized_at: Callable[[Point, int], Sized],
    fixed_frames: int | None = None,
    overheads: StageOverheads = StageOverheads(),
    left_out: list[str] | None = None,
    shelved: Callable[[Point], bool] = lambda p: False,
    measured_start_s: float | None = None,
    least_frames: Callable[[Point, int], int] = lambda p, f: f,
) -> StagePlan:
    """Each grid's frames: the most any of its points needs (size_frames), or `fixed_frames` (the
    rehearsal); every job predicted there, its runs' starts as one process runs them (with_starts).
    The warm-up: the first point at the fewest frames that hold WARMUP_UPDATES learner updates.
    least_frames(point, frames): the fewest frames from `frames` up that the job's config accepts
    (e.g. each of 256 actors must fill one sequence), where the prediction asks for fewer."""
    frames: dict[Point, int] = {}
    for ps, _ in grid_groups(points):
        f = fixed_frames or max(least_frames(p, size_frames(lambda n, p=p: sized_at(p, n))) for p in ps)
        frames |= dict.fromkeys(ps, f)
    jobs = [StageJob(p, frames[p], sized_at(p, frames[p]), 0.0, shelved=shelved(p)) for p in points]
    w = points[0]
    wf = fixed_frames or least_frames(
        w, size_frames(lambda n: sized_at(w, n), min_steady_s=0.0, min_updates=WARMUP_UPDATES)
    )
    warm, jobs = with_starts(StageJob(w, wf, sized_at(w, wf), 0.0, True, shelved(w)), jobs, measured_start_s)
    plan = StagePlan(stage, warm, jobs, overheads, list(left_out or []), fixed_frames)
    plan.measured_start_s = measured_start_s
    return plan


# --- parts: a stage the budget cannot hold in one stay -----------------------------------------


def _runs(plan: StagePlan) -> list[tuple[StageJob, int]]:
    """Every run of the stage as (job, repeat), repeat by repeat: every configuration's first
    run, then every one's second, ... (a replicate of the stage each)."""
    most = max(j.point.repeats for j in plan.jobs)
    return [(j, r) for r in range(most) for j in plan.jobs if j.point.repeats > r]


def _part(plan: StagePlan, runs: list[tuple[StageJob, int]], seed: int) -> StagePlan:
    """The part that runs `runs` in one process: each configuration's runs in it as one job
    (repeats: how many, first_repeat: the first), after the stage's warm-up in its own process."""
    held: dict[Point, list[int]] = {}
    for j, r in runs:
        held.setdefault(j.point, []).append(r)
    by_point = {j.point: j for j in plan.jobs}
    jobs = [
        replace(by_point[p], point=replace(p, repeats=len(rs), first_repeat=rs[0]), then_s=None)
        for p, rs in held.items()
    ]
    warm, jobs = with_starts(plan.warmup, jobs, plan.measured_start_s)
    return replace(plan, warmup=warm, jobs=jobs, seed=seed)


def split_parts(plan: StagePlan, budget_s: float, seed: int) -> list[StagePlan]:
    """The stage as it runs: itself where it fits the budget; else the fewest parts, each a stay
    of its own within the budget: whole replicates (every configuration once) per part where one
    replicate fits, else the runs in replicate order, each part as many as fit. No run is cut:
    PlanError where a stay cannot hold the warm-up and the longest job once (check_budget)."""
    check_budget(plan, budget_s)
    if plan.total_s() <= budget_s:
        return [replace(plan, seed=None)]  # one process: the sweeps' own repeats give the seeds
    runs = _runs(plan)
    replicates = [[(j, r) for j, r in runs if r == k] for k in range(runs[-1][1] + 1)]
    whole = _part(plan, replicates[0], seed).total_s() <= budget_s
    parts: list[list[tuple[StageJob, int]]] = [[]]
    for chunk in replicates if whole else [[run] for run in runs]:
        if parts[-1] and _part(plan, parts[-1] + chunk, seed).total_s() > budget_s:
            parts.append([])
        parts[-1] += chunk
    n = len(parts)
    return [replace(_part(plan, rs, seed), part=(k + 1, n)) for k, rs in enumerate(parts)]


# --- the parts' plan on file: every part runs the plan its first part made ------------------------


def parts_to_json(parts: list[StagePlan], host: str) -> dict:
    """The stage's parts as plain data (`--out`/stage_plan.json), with the GPU they were planned for."""
    return {"host": host, "parts": [asdict(p) for p in parts]}


def parts_from_json(data: dict) -> list[StagePlan]:
    """The parts stage_plan.json holds; ValueError naming what is missing."""

    def job(d: dict) -> StageJob:
        return StageJob(**(d | {"point": Point(**d["point"]), "sized": Sized(**d["sized"])}))

    try:
        return [
            StagePlan(
                **(
                    p
                    | {
                        "warmup": job(p["warmup"]),
                        "jobs": [job(j) for j in p["jobs"]],
                        "overheads": StageOverheads(**p["overheads"]),
                        "part": tuple(p["part"]),
                    }
                )
            )
            for p in data["parts"]
        ]
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a stage plan written by pipelines/gpu_study.py --stage ({type(e).__name__}: {e})") from e
