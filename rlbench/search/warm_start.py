"""Warm-starting the ratio search from a profile (`search.warm_start_profile=<run id>`).

Before the first trial of a new study, the performance model (rlbench.predict) predicts a
grid of candidates over the search space and the best `search.warm_start_trials` of them are
enqueued as the study's first trials (Optuna runs WAITING trials first). Ranking uses the
search's objectives the model predicts (fps, runtime_s, task_fps, learner_updates_per_s,
energy_per_task_j where the profile has power): candidates in order of their Pareto rank,
then predicted runtime_s; objectives it cannot predict are named on the parent run and left
out of the ranking. A resumed study (it has trials) is never enqueued again.

The parent run records the profile (tag `warm_start_profile`) and the enqueued predictions
(`warm_start/predictions.json`); the report then draws predicted vs measured for the trials
and names where they disagree (rlbench/report/prediction.py).
"""

from __future__ import annotations

import math

from rlbench.search.space import SearchError


def _spread(lo: int, hi: int, most: int = 8) -> list[int]:
    if hi - lo + 1 <= most:
        return list(range(lo, hi + 1))
    return sorted({round(lo + (hi - lo) * i / (most - 1)) for i in range(most)})


def candidates(s) -> list[dict[str, int]]:
    """Actors at the powers of two inside [low, high] and both ends; every actor_threads and
    sm_limit in range (at most 8 evenly spaced values of a wide one, ends included)."""
    lo, hi = s.actors
    actors = sorted({lo, hi} | {2 ** k for k in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)})
    return [{"actors": a, "actor_threads": t, "sm_limit": u}
            for a in actors for t in _spread(*s.actor_threads) for u in _spread(*s.sm_limit)]


PREDICTED = {"fps": lambda p: p.fps, "runtime_s": lambda p: p.runtime_s, "task_fps": None,
             "learner_updates_per_s": lambda p: p.learner_updates_per_s,
             "energy_per_task_j": lambda p: p.energy_per_task_j}


def ranked(preds: list, objectives: list[str], directions: list[str], frames: int) -> tuple[list, list[str]]:
    """(predictions best first, the objectives the ranking could not use)."""
    def value(p, name):
        if name == "task_fps":
            return frames / p.runtime_s
        getter = PREDICTED.get(name)
        return getter(p) if getter else None

    used = [(o, d) for o, d in zip(objectives, directions) if all(value(p, o) is not None for p in preds)]
    unused = [o for o in objectives if o not in {u for u, _ in used}]
    if not used:
        used = [("runtime_s", "minimize")]
    keys = [[(v if d == "minimize" else -v) for o, d in used for v in [value(p, o)]] for p in preds]
    rank, left, level = {}, set(range(len(preds))), 0
    while left:  # non-dominated sorting: level 0 is the Pareto front
        front = {i for i in left if not any(all(a <= b for a, b in zip(keys[j], keys[i])) and keys[j] != keys[i]
                                            for j in left)}
        rank |= dict.fromkeys(front, level)
        left -= front
        level += 1
    order = sorted(range(len(preds)), key=lambda i: (rank[i], preds[i].runtime_s))
    return [preds[i] for i in order], unused


def load_machine(s):
    """The profile's Machine; SearchError (before any trial) when it cannot be used."""
    from rlbench.predict.jobs import Machine
    from rlbench.predict.profiles import ProfileError, load_profile

    try:
        profile = load_profile(s.warm_start_profile)
    except ProfileError as e:
        raise SearchError(f"search.warm_start_profile={s.warm_start_profile}: {e}; allowed: a run id of "
                          "python -m rlbench.profile in this tracking store") from None
    return Machine(profile, profile)


def predict_candidates(base: list[str], s, machine, compose) -> list:
    """Every candidate predicted, its config composed (`compose(overrides)` -> a validated
    config; the sweeper's loader inside a sweep) from the search's job overrides."""
    from rlbench.predict.jobs import predict_job

    knobs = ("actors", "actor_threads", "sm_limit")
    keep = [o for o in base if o.split("=", 1)[0].lstrip("+~") not in knobs]
    preds = []
    for c in candidates(s):
        try:
            preds.append(predict_job(compose(keep + [f"{k}={v}" for k, v in c.items()]), machine))
        except ValueError as e:  # a profile of another env or algorithm: the same for every candidate
            raise SearchError(f"search.warm_start_profile={s.warm_start_profile}: {e}") from None
    return preds


def enqueue(study, s, base: list[str], machine, compose, frames: int) -> tuple[list, list[str]]:
    """Enqueue the best predicted configurations on a study without trials; ([], []) if it has some."""
    if study.trials:
        return [], []
    best, unused = ranked(predict_candidates(base, s, machine, compose), list(s.objectives), list(s.directions),
                          frames)
    chosen = best[: s.warm_start_trials]
    for p in chosen:
        study.enqueue_trial({k: p.knobs[k] for k in ("actors", "actor_threads", "sm_limit")},
                            user_attrs={"warm_start": True, "predicted_fps": p.fps,
                                        "predicted_runtime_s": p.runtime_s})
    return chosen, unused


def record(parent: str, s, machine, chosen: list, unused: list[str]) -> None:
    """The profile and the enqueued predictions on the search's parent run."""
    import mlflow

    client = mlflow.MlflowClient()
    client.set_tag(parent, "warm_start_profile", s.warm_start_profile)
    client.set_tag(parent, "warm_start_note",
                   f"{len(chosen)} trial(s) enqueued from {machine.names()}; ranked by "
                   + (", ".join(o for o in s.objectives if o not in unused) or "predicted runtime_s")
                   + (f"; not predictable, left out of the ranking: {', '.join(unused)}" if unused else ""))
    rows = [{"trial": i, **{k: p.knobs[k] for k in ("actors", "actor_threads", "sm_limit")},
             "predicted_fps": p.fps, "predicted_runtime_s": p.runtime_s, "predicted_bound": p.bound}
            for i, p in enumerate(chosen)]
    if rows:
        client.log_table(parent, {k: [r[k] for r in rows] for k in rows[0]}, "warm_start/predictions.json")
