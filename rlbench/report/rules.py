"""The report's other rules: pure functions over numbers, no MLflow and no plotting (tested on
synthetic runs): `pareto`, `on_off_policy`, `precision_shift`, `actor_saturation`,
`learner_ceiling_fps`. The verdict, the knee and the recommendation are rlbench/core/verdict.py's.
docs/metrics.md, "The report, inside".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from rlbench.core.algorithms import on_policy


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
