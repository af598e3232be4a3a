"""The verdict: pure functions over numbers, no MLflow and no plotting (tested on synthetic runs).

`knee`, `bottleneck`, `recommend`, `study_rule`, `pareto`, `actor_saturation` and the others;
with repeats, medians per configuration, told apart only by the one verdict rule
(rlbench/core/verdict.py). The rules: docs/metrics.md, "The report, inside".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rlbench.core.algorithms import on_policy
from rlbench.core.verdict import UNKNOWN_FLOOR, Verdict, against, difference, judge
from rlbench.tracking.study_records import NO_GPU_RATIO  # noqa: F401 - the report's name for it


@dataclass
class Knee:
    actors: int | None  # None: fewer than two points
    runtime_s: float | None  # the knee's task time
    gain_after: float | None  # the largest share of the task's time any larger actor count saved
    reached: bool  # False: still saving >= share at the largest actor count swept
    text: str
    spread: float | None = None  # the sweep's noise floor (relative, rlbench/core/verdict.py); None: unknown


def knee(
    runtimes: dict[int, float], share: float = 0.10, fps: dict[int, float] | None = None, floor: float | None = None
) -> Knee:
    """runtimes: actors -> runtime_s (the task's time, the median of its runs); fps: actors ->
    the actors' fps, stated beside; floor: the sweep's noise floor (rlbench/core/verdict.py;
    None: unknown, one run each). The knee is the smallest actor count whose task no larger
    actor count shortens by `share` or more and told apart (a relative difference above the
    floor): the task's time, not the actors' rate, since a learner that bounds the task makes
    faster actors worth nothing."""
    xs = sorted(runtimes)
    if len(xs) < 2:
        return Knee(None, None, None, False, f"needs at least two actor counts, got {len(xs)}")
    tail = "" if floor is not None else f"; {UNKNOWN_FLOOR}"
    for i, a in enumerate(xs[:-1]):
        best = min(xs[i + 1 :], key=lambda b: runtimes[b])
        saved = 1 - runtimes[best] / runtimes[a] if runtimes[a] > 0 else 0.0
        d = difference(runtimes[a], runtimes[best])
        unclear = floor is not None and d <= floor
        if saved < share or unclear:
            how = (
                f"more actors shorten the task by at most {saved:.1%}"
                if saved > 0
                else "no larger actor count shortens the task"
            )
            if saved >= share:
                how = (
                    f"no larger actor count shortens the task measurably ({saved:.1%} shorter, within the noise floor)"
                )
            told = f" (not told apart: {d:.1%} difference, noise floor {floor:.1%})" if unclear else ""
            return Knee(
                a,
                runtimes[a],
                saved,
                True,
                f"knee at {a} actors (task {runtimes[a]:.1f} s): {how} (threshold {share:.0%}); "
                f"at {best} actors: {_changes(runtimes, fps, a, best)}{told}{tail}",
                floor,
            )
    last, prev = xs[-1], xs[-2]
    return Knee(
        last,
        runtimes[last],
        None,
        False,
        f"no knee within the swept range: {prev} -> {last} actors: {_changes(runtimes, fps, prev, last)} "
        f"(threshold {share:.0%}); sweep further{tail}",
        floor,
    )


def _changes(runtimes: dict, fps: dict | None, a: int, b: int) -> str:
    """The task's time and the actors' fps from a to b actors, and which one bounds the task."""
    task = runtimes[b] / runtimes[a] - 1 if runtimes[a] > 0 else float("nan")
    text = f"task {task:+.1%}"
    if fps and fps.get(a) and fps.get(b) is not None:
        rate = fps[b] / fps[a] - 1
        text = f"actors' fps {rate:+.1%}, {text}"
        # the actors sped up, and by 10% more than the task's rate (frames / runtime_s) did:
        # compare rates with rates (a task 47% shorter ran 1.89x as fast, as did actors at +89%)
        if rate >= 0.10 and (1 + rate) * (1 + task) >= 1.10:
            text += ": the learner bounds the task, not the actors"
    return text


@dataclass
class Recommendation:
    name: str
    ratio: float | None
    fps: float | None
    energy_j: float | None
    text: str
    runtime_spread: float | None = None  # max - min of its runs' runtime_s; None: one run (unknown)
    runs: int = 1
    tied: list[str] = field(default_factory=list)  # configurations not told apart from it (the verdict rule)
    noise_floor: float | None = None  # the verdict's (rlbench/core/verdict.py); None: unknown


def _pick(ok: list[dict], v: Verdict, tolerance: float) -> tuple[dict, str]:
    """The verdict's best; where every candidate's energy is known, the least energy per task
    among those within `tolerance` of its runtime_s (a few percent of time for fewer joules)."""
    fastest = next((j for j in ok if j["name"] == v.best), None) or min(ok, key=lambda j: j["runtime_s"])
    near = [j for j in ok if j["runtime_s"] <= (1 + tolerance) * fastest["runtime_s"]]
    if all(j.get("energy_j") is not None for j in near):
        how = (
            f"least energy per task among the jobs within {tolerance:.0%} of the best's task time"
            if len(near) > 1
            else f"best by median {v.metric}"
        )
        return min(near, key=lambda j: j["energy_j"]), how
    return fastest, f"best by median {v.metric} (energy per task not measured for all of them)"


def recommend(
    jobs: list[dict], tolerance: float = 0.05, ratios: bool = True, verdict: Verdict | None = None
) -> Recommendation | None:
    """jobs: dicts with name, ratio, runtime_s (time to finish the task), fps, energy_j (None
    when not measured): one per configuration, the medians of its runs, with `runtime_spread`
    (max - min of its runs' runtime_s, None or absent for one run), `runs` and `runtime_runs`
    (its runs' runtime_s). verdict: the sweep's (rlbench/core/verdict.py; None: judged here on
    runtime_runs). The pick (_pick) and the configurations not told apart from it by the
    verdict's noise floor. ratios=False (no GPU): the text names the job, not its ratio."""
    ok = [j for j in jobs if j.get("runtime_s") is not None]
    if not ok:
        return None
    v = verdict or judge({j["name"]: j.get("runtime_runs") or [j["runtime_s"]] for j in ok})
    pick, how = _pick(ok, v, tolerance)
    comps = against(v, pick["name"])
    tied = [c.name for c in comps if c.told_apart is False]
    text = _recommendation_text(pick, ok, how, ratios, v)
    text += "".join(f"; {c.text}" for c in comps if c.told_apart is False)
    if len(ok) > 1 and v.floor is None:
        text += f"; {v.floor_text()}"
    return Recommendation(
        pick["name"],
        pick.get("ratio"),
        pick.get("fps"),
        pick.get("energy_j"),
        text,
        pick.get("runtime_spread"),
        pick.get("runs") or 1,
        tied,
        v.floor,
    )


def _recommendation_text(pick: dict, ok: list[dict], how: str, ratios: bool, v: Verdict) -> str:
    energy = f"{pick['energy_j']:.0f} J per task" if pick.get("energy_j") is not None else "energy not measured"
    ratio = f"{pick['ratio']:.3g}" if pick.get("ratio") is not None else "unknown"
    fps = f"{pick['fps']:.0f} fps" if pick.get("fps") is not None else "fps unknown"
    runs = pick.get("runs") or 1
    span = f" (median of {runs} runs; {v.floor_text()})" if runs > 1 and v.floor is not None else ""
    task = f"task in {pick['runtime_s']:.1f} s{span}, {fps}, {energy}; {how}"
    if not ratios:
        return f"{pick['name']}: {task}"
    if len(ok) > 1 and len({j.get("ratio") for j in ok}) == 1:  # the ratio is not what the jobs differ in
        return f"{pick['name']}: {task}; every job ran at CPU/GPU ratio {ratio}, so this comparison picks no ratio"
    return f"CPU/GPU ratio {ratio} ({pick['name']}): {task}"


def study_rule(
    hardware_threads: int | None,
    units_total: int | None,
    unit: str,
    jobs: list[tuple[float, float]],
    single_run: bool = False,
) -> str:
    """The study argues RL systems want CPU threads / SMs >= 1 (its 40-SM job, ratio 1, took
    only 6% longer than with all 80 SMs). For this host: its ratio with every unit, how many
    units the rule says are enough, and how much longer the best swept job at ratio >= 1
    took than the fastest. jobs: (cpu_gpu_ratio, runtime_s) of the finished jobs (medians of
    repeats); single_run: each configuration ran once, so the verdict is said without a spread."""
    if not hardware_threads or not units_total:
        return "study's rule (ratio >= 1): not evaluated (host threads or compute units unknown)"
    host_ratio = hardware_threads / units_total
    text = (
        f"study's rule (ratio >= 1): this host has {hardware_threads} HW threads / {units_total} {unit}s = "
        f"ratio {host_ratio:.3g} with every unit, so the rule predicts that {min(hardware_threads, units_total)} "
        f"{unit}(s) are enough"
    )
    if not jobs:
        return text + "; no finished job to check it against"
    best = min(rt for _, rt in jobs)
    at_one = [rt for r, rt in jobs if r >= 1]
    if not at_one:
        return text + f"; no job ran at ratio >= 1 (sweep sm_limit <= {hardware_threads} to test it)"
    slower = min(at_one) / best - 1
    return text + (
        f"; measured: the best job at ratio >= 1 took {slower:+.0%} longer than the fastest "
        + ("(consistent with the rule)" if slower <= 0.10 else "(the rule does not hold here)")
        + (f"; {UNKNOWN_FLOOR}" if single_run else "")
    )


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (fps to maximise, energy to minimise) no other point dominates."""
    front = []
    for i, (f, e) in enumerate(points):
        dominated = any(f2 >= f and e2 <= e and (f2 > f or e2 < e) for j, (f2, e2) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return front


RL_SCOPE_RATIO = 3.5  # RL-Scope (Gleeson et al. 2021): on-policy >= 3.5x more simulation-bound


@dataclass
class OnOff:
    on: str  # the on-policy algorithm compared
    off: str
    sim_share: dict  # algorithm -> median share of runtime in env stepping
    learner_share: dict  # algorithm -> median share of runtime the learner computed
    ratio: float | None  # sim_share[on] / sim_share[off]
    text: str


def on_off_policy(shares: dict[str, list[tuple[float, float | None]]]) -> OnOff | None:
    """shares: algorithm -> (sim_share, learner_share) of its finished jobs. With one on-policy
    and one off-policy algorithm: how many times more simulation-bound the on-policy one is."""
    on = [a for a in shares if on_policy(a) is True]
    off = [a for a in shares if on_policy(a) is False]
    if not on or not off:
        return None
    on, off = on[0], off[0]
    sim = {a: statistics.median(s for s, _ in v) for a, v in shares.items()}
    learn = {
        a: statistics.median(x for _, x in v if x is not None) if any(x is not None for _, x in v) else None
        for a, v in shares.items()
    }
    ratio = sim[on] / sim[off] if sim[off] > 0 else None
    compare = (
        f"{ratio:.2f}x as simulation-bound as {off}"
        if ratio is not None
        else f"not comparable ({off} spent no time stepping)"
    )
    verdict = (
        ""
        if ratio is None
        else (" (RL-Scope's >= 3.5x holds here)" if ratio >= RL_SCOPE_RATIO else " (below RL-Scope's >= 3.5x)")
    )
    text = (
        f"{on} (on-policy) spent {sim[on]:.0%} of its task stepping environments, {off} (off-policy) "
        f"{sim[off]:.0%}: {on} is {compare}{verdict}; learner busy {_pct(learn[on])} vs {_pct(learn[off])}"
    )
    return OnOff(on, off, sim, learn, ratio, text)


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"{x:.0%}"


@dataclass
class PrecisionShift:
    best: dict  # precision -> {actors, runtime_s, ratio, bound, learner_mfu} of its fastest configuration
    moved: bool  # whether the best actor count differs between precisions
    text: str


PRECISION_ORDER = ("fp32", "tf32", "bf16", "fp16")


def precision_shift(best: dict[str, dict]) -> PrecisionShift | None:
    """best: precision -> its fastest configuration ({actors, runtime_s, ratio: cpu_gpu_ratio or
    None, bound: what bounds it in words, learner_mfu or None}). With two or more precisions:
    how far the best actor count (and CPU/GPU ratio) moved between them, or that it did not and
    what bounds the best jobs instead (COPA-GPU's question: faster low-precision math asks more
    of the CPU side)."""
    if len(best) < 2:
        return None
    order = sorted(best, key=lambda p: PRECISION_ORDER.index(p) if p in PRECISION_ORDER else len(PRECISION_ORDER))
    base = best[order[0]]

    def one(p: str) -> str:
        b = best[p]
        ratio = f", cpu_gpu_ratio {b['ratio']:g}" if b.get("ratio") is not None else ""
        mfu = f", learner_mfu {b['learner_mfu']:.1%}" if b.get("learner_mfu") is not None else ""
        faster = (
            "" if p == order[0] else f", {b['runtime_s'] / base['runtime_s'] - 1:+.0%} task time against {order[0]}"
        )
        return f"{p} best at {b['actors']} actors ({b['runtime_s']:.1f} s{faster}{ratio}{mfu})"

    moved = len({best[p]["actors"] for p in order}) > 1
    head = (
        "the best actor count moved between precisions: "
        if moved
        else f"the best actor count did not move ({base['actors']} actors at every precision): "
    )
    text = head + "; ".join(one(p) for p in order)
    if not moved:
        text += "; what bounds the best jobs instead: " + ", ".join(f"{p} {best[p]['bound']}" for p in order)
    return PrecisionShift(best, moved, text)


@dataclass
class Saturation:
    axis: str  # "actor_hosts" or "actor_procs"
    count: int  # the fewest that saturate one learner
    bound: str  # what bounds the job there (rlbench.core.bound)
    reached: bool  # False: the largest count swept still shortened the task by >= share
    text: str


def learner_ceiling_fps(m: dict[str, float]) -> float | None:
    """The learner's rate as a ceiling on fps: the task's frames over the learner's busy time
    (learner_share x runtime_s, its wall time less waiting): the fps at which a learner that
    never waited would take the data; None where the job did not log what it needs."""
    frames, share, runtime = m.get("frames"), m.get("learner_share"), m.get("runtime_s")
    return frames / (share * runtime) if frames and share and runtime else None


def actor_saturation(points: dict[int, dict], axis: str, share: float = 0.10) -> Saturation | None:
    """points: count -> {"runtime_s", "fps", "bound", "ceiling_fps"} (a median per count). The
    fewest actor hosts (or processes) after which more shorten the task by less than `share`
    of its time, and what bounds the job there; None with fewer than two counts."""
    counts = sorted(c for c, p in points.items() if p.get("runtime_s"))
    if len(counts) < 2:
        return None
    what = axis.replace("_", " ")
    for c in counts:
        gain = (
            max((points[c]["runtime_s"] - points[d]["runtime_s"]) / points[c]["runtime_s"] for d in counts if d > c)
            if c != counts[-1]
            else 0.0
        )
        if gain < share:
            break
    p, reached = points[c], c != counts[-1]
    ceiling = p.get("ceiling_fps")
    rate = f", the learner's rate {ceiling:.0f} frames/s" if ceiling else ""
    more = (
        f"more shorten the task by less than {share:.0%}"
        if c != counts[-1]
        else f"the most swept; {what} beyond {c} were not measured"
    )
    text = (
        f"{what}: {c} saturate one learner ({more}); then the job is bound by {p.get('bound', 'unknown')} "
        f"(runtime_s {p['runtime_s']:.1f} s, fps {p['fps']:.0f}{rate})"
    )
    return Saturation(axis, c, p.get("bound", "unknown"), reached, text)
