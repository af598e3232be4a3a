"""Warm-starting the ratio search from a profile (`search.warm_start_profile=<run id>`).

Before a new study's first trial the performance model predicts a grid of candidates over the
search space, and the best `search.warm_start_trials` are enqueued as its first trials; the
parent run records the profile and the predictions. docs/predict.md, "Warm-starting the ratio search".
"""

from __future__ import annotations

import math

import optuna

from rlbench.predict.curves import ProfileError, load_profile
from rlbench.predict.jobs import Machine, predict_job
from rlbench.searches.space import SearchError

KNOBS = ("actors", "actor_threads", "sm_limit")  # the params of space.suggest


def _spread(lo: int, hi: int, most: int = 8) -> list[int]:
    if hi - lo + 1 <= most:
        return list(range(lo, hi + 1))
    return sorted({round(lo + (hi - lo) * i / (most - 1)) for i in range(most)})


def candidates(search) -> list[dict[str, int]]:
    """Actors at the powers of two inside [low, high] and both ends; every actor_threads and
    sm_limit in range (at most 8 evenly spaced values of a wide one, ends included)."""
    lo, hi = search.actors
    actors = sorted({lo, hi} | {2**k for k in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)})
    return [
        {"actors": a, "actor_threads": t, "sm_limit": u}
        for a in actors
        for t in _spread(*search.actor_threads)
        for u in _spread(*search.sm_limit)
    ]


PREDICTED = {
    "fps": lambda p: p.fps,
    "runtime_s": lambda p: p.runtime_s,
    "task_fps": None,
    "learner_updates_per_s": lambda p: p.learner_updates_per_s,
    "energy_per_task_j": lambda p: p.energy_per_task_j,
}


def order(preds: list, objectives: list[str], directions: list[str], frames: int) -> tuple[list[int], list[str]]:
    """(indices of `preds` best first, the objectives the ranking could not use)."""

    def value(p, name):
        if name == "task_fps":
            return frames / p.runtime_s
        getter = PREDICTED.get(name)
        return getter(p) if getter else None

    used = [(o, d) for o, d in zip(objectives, directions, strict=True) if all(value(p, o) is not None for p in preds)]
    unused = [o for o in objectives if o not in {u for u, _ in used}]
    if not used:
        used = [("runtime_s", "minimize")]
    keys = [[(v if d == "minimize" else -v) for o, d in used for v in [value(p, o)]] for p in preds]
    rank, left, level = {}, set(range(len(preds))), 0
    while left:  # non-dominated sorting: level 0 is the Pareto front
        front = {
            i
            for i in left
            if not any(all(a <= b for a, b in zip(keys[j], keys[i], strict=True)) and keys[j] != keys[i] for j in left)
        }
        rank |= dict.fromkeys(front, level)
        left -= front
        level += 1
    return sorted(range(len(preds)), key=lambda i: (rank[i], preds[i].runtime_s)), unused


def ranked(preds: list, objectives: list[str], directions: list[str], frames: int) -> tuple[list, list[str]]:
    """(predictions best first, the objectives the ranking could not use)."""
    best, unused = order(preds, objectives, directions, frames)
    return [preds[i] for i in best], unused


def choose(pairs: list[tuple[dict, object]], search, frames: int) -> tuple[list[tuple[dict, object]], list[str]]:
    """The best `search.warm_start_trials` (params, prediction) pairs, one per distinct predicted job
    (candidates in grid order, so the smallest of indistinguishable values is kept)."""
    best, unused = order([p for _, p in pairs], list(search.objectives), list(search.directions), frames)
    chosen, seen = [], set()
    for i in best:
        knobs = tuple(sorted(pairs[i][1].knobs.items()))
        if knobs not in seen and len(chosen) < search.warm_start_trials:
            seen.add(knobs)
            chosen.append(pairs[i])
    return chosen, unused


def load_machine(search):
    """The profile's Machine; SearchError (before any trial) when it cannot be used."""

    try:
        profile = load_profile(search.warm_start_profile)
    except ProfileError as e:
        raise SearchError(
            f"search.warm_start_profile={search.warm_start_profile}: {e}; allowed: a run id of "
            "python -m rlbench.profile in this tracking store"
        ) from None
    return Machine(profile, profile)


def predict_candidates(base: list[str], search, machine, compose) -> list[tuple[dict, object]]:
    """(params, prediction) of every candidate, its config composed (`compose(overrides)` -> a
    validated config; the sweeper's loader inside a sweep) from the search's job overrides."""

    keep = [o for o in base if o.split("=", 1)[0].lstrip("+~") not in KNOBS]
    pairs = []
    for c in candidates(search):
        try:
            pairs.append((c, predict_job(compose(keep + [f"{k}={v}" for k, v in c.items()]), machine)))
        except ValueError as e:  # a profile of another env or algorithm: the same for every candidate
            raise SearchError(f"search.warm_start_profile={search.warm_start_profile}: {e}") from None
    return pairs


def enqueue(study, search, base: list[str], machine, compose, frames: int) -> tuple[list[dict], list[str]]:
    """Enqueue the best predicted configurations on a study without trials; ([], []) if it has
    some. Returns one row per enqueued trial (its number, params and prediction) and the
    objectives left out of the ranking."""
    if study.trials:
        return [], []
    chosen, unused = choose(predict_candidates(base, search, machine, compose), search, frames)
    for params, p in chosen:
        study.enqueue_trial(
            params, user_attrs={"warm_start": True, "predicted_fps": p.fps, "predicted_runtime_s": p.runtime_s}
        )
    waiting = sorted(
        t.number
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        if t.user_attrs.get("warm_start")
    )
    return [
        {"trial": n, **params, "predicted_fps": p.fps, "predicted_runtime_s": p.runtime_s, "predicted_bound": p.bound}
        for n, (params, p) in zip(waiting, chosen, strict=True)
    ], unused


def note(search, machine, rows: list[dict], unused: list[str]) -> str:
    """One line for the parent run: what was enqueued, from which profile, ranked by what."""
    return (
        f"warm start: {len(rows)} trial(s) enqueued from {machine.names()}; ranked by "
        + (", ".join(o for o in search.objectives if o not in unused) or "predicted runtime_s")
        + (f"; not predictable, left out of the ranking: {', '.join(unused)}" if unused else "")
    )


def record(parent, search, machine, rows: list[dict], unused: list[str]) -> None:
    """The profile and the enqueued predictions on the search's parent run (a tracking.parent.ParentRun)."""
    parent.set_tags(
        {"warm_start_profile": search.warm_start_profile, "warm_start_note": note(search, machine, rows, unused)}
    )
    if rows:
        parent.log_table({k: [r[k] for r in rows] for k in rows[0]}, "warm_start/predictions.json")
