"""The study's parent run: found or opened once per study, and at the end of every run of the
command given the best trial(s), the Pareto front, plots and the trials CSV (through the
tracking port: a tracking.parent.ParentRun, or a test's fake). docs/metrics.md, "Search parent run"."""

from __future__ import annotations

import logging
from pathlib import Path

import optuna

from rlbench.config.schema import SearchConfig
from rlbench.search.study import complete, quiet_optuna
from rlbench.tracking.parent_note import artifact_link, jobs_table
from rlbench.tracking.readers import study_tags
from rlbench.tracking.unmeasured import TAG as UNMEASURED
from rlbench.tracking.unmeasured import format_unmeasured
from rlbench.tracking.views import runs_view_key, view_link

log = logging.getLogger(__name__)


def study_params(s, job: list[str]) -> dict:
    """What a new study's parent records as its parameters, as a sweep's records its grid: the
    line every trial runs, the trials asked for, the space, the sampler's seed."""
    return {"job": " ".join(job)[:6000] or "(none)", "n_trials": s.n_trials, "sampler_seed": s.seed,
            "space": f"actors={list(s.actors)} actor_threads={list(s.actor_threads)} sm_limit={list(s.sm_limit)}"}


def study_parent(experiment, study: str, what: str = "", params: dict | None = None):
    """The study's one parent run in the experiment (tracking.experiment.Experiment): found and
    RUNNING again when the study resumes (its parameters are those it was opened with), else
    opened with `params`, named by the study and `what` it runs (its env and algorithm)."""
    parent = experiment.study_parent(study)
    if parent is None:
        return experiment.open_parent(f"study {study} {what}".strip(), "search", study_tags(study), params)
    parent.reopen()
    return parent


def recommend(front: list, directions: list[str]):
    """The front point nearest the utopia point after scaling each objective to [0, 1]."""
    if len(front) == 1:
        return front[0]
    cols = list(zip(*(t.values for t in front)))
    spans = [(min(c), max(c)) for c in cols]

    def regret(t):
        r = 0.0
        for v, (lo, hi), d in zip(t.values, spans, directions):
            x = (v - lo) / (hi - lo) if hi > lo else 0.0
            r += (1 - x if d == "maximize" else x) ** 2
        return r

    return min(front, key=regret)


def recommendation_text(best, front: list, names: list[str]) -> str:
    p = best.params
    vals = ", ".join(f"{n}={v:.4g}" for n, v in zip(names, best.values))
    lines = [(f"recommended: actors={p['actors']} actor_threads={p['actor_threads']} sm_limit={p['sm_limit']} "
              f"-> cpu_gpu_ratio={best.user_attrs.get('cpu_gpu_ratio')} ({vals}; trial {best.number})")]
    for t in front:
        if t.number != best.number:
            diffs = ", ".join(f"{n} {100 * (v / b - 1):+.1f}%" for n, v, b in zip(names, t.values, best.values) if b)
            lines.append(f"  front trial {t.number} {t.params}: {diffs} vs recommended")
    return "\n".join(lines)


def report(study: optuna.Study, s: SearchConfig, parent, out_dir: Path, labels: list[str] | None = None) -> str | None:
    """Best trial(s), plots and the trials CSV on the parent run; returns the recommendation.
    labels: the objectives as shown ("(estimate)" after an estimated one); their names if None."""
    names = list(s.objectives)
    labels = list(labels or names)
    out_dir.mkdir(parents=True, exist_ok=True)
    study.trials_dataframe().to_csv(out_dir / "trials.csv", index=False)
    parent.log_file(out_dir / "trials.csv")
    done = complete(study)
    if not done:
        return None
    front = study.best_trials
    best = recommend(front, list(s.directions))
    parent.set_tags({f"best_{k}": str(v) for k, v in best.params.items()}
                    | {"best_cpu_gpu_ratio": _g4(best.user_attrs.get("cpu_gpu_ratio")), "best_trial": str(best.number),
                       "pareto_front_trials": " ".join(str(t.number) for t in front)})
    parent.log_metrics({f"best_{n}": v for n, v in zip(names, best.values)})
    not_drawn = plots(study, labels, out_dir, parent, list(s.directions))
    if not_drawn:
        parent.set_tags({UNMEASURED: format_unmeasured(not_drawn)})
    text = recommendation_text(best, front, labels)
    warm = parent.tags().get("warm_start_note")  # rlbench/search/warm_start.py
    parent.describe(search_note(study.study_name, len(done), text, warm,
                                [*links(parent), "", *jobs_table(trial_rows(study), parent.experiment_id, labels)]))
    return text


def _g4(v) -> str:
    return f"{v:.4g}" if isinstance(v, int | float) else str(v)


_STATUS = {"COMPLETE": "FINISHED", "FAIL": "FAILED", "PRUNED": "KILLED (pruned)", "RUNNING": "RUNNING",
           "WAITING": "NOT STARTED"}


def trial_rows(study: optuna.Study) -> list[dict]:
    """A row per trial for the parent's jobs table: its knobs, its run, its headline numbers."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        knobs = " ".join(f"{k}={v}" for k, v in t.params.items())
        rows.append({"name": f"trial {t.number}: {knobs}", "run_id": t.user_attrs.get("run_id"),
                     "status": _STATUS[t.state.name], **t.user_attrs.get("headline", {})})
    return rows


def links(parent) -> list[str]:
    """The description's first links: the trials' table and charts, the Pareto figure, trials.csv."""
    exp, key = parent.experiment_id, runs_view_key(parent.run_id)
    return [(f"[Jobs table]({view_link(exp, key)}) · [Charts]({view_link(exp, key, chart=True)}) · "
             f"[Pareto front]({artifact_link(exp, parent.run_id, 'pareto_front.png')}) · "
             f"[trials.csv]({artifact_link(exp, parent.run_id, 'trials.csv')})")]


def plots(study: optuna.Study, names: list[str], out_dir: Path, parent, directions: list[str] | None = None) -> dict[str, str]:
    """The Pareto front (one objective: the optimisation history), the params' importances and
    slices for the first objective as optimised (Optuna's importances are for a low target: a
    maximised one is negated), drawn into out_dir and logged on the parent; returns those not
    drawn, with why."""
    import matplotlib  # lazy: keeps matplotlib off the start

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: keeps matplotlib off the start
    import optuna.visualization.matplotlib as ovm  # lazy: keeps matplotlib off the start

    sign = -1.0 if (directions or ["minimize"])[0] == "maximize" else 1.0
    first = f"-{names[0]} (maximised)" if sign < 0 else f"{names[0]} (minimised)"
    draw = {"pareto_front.png": (lambda: ovm.plot_pareto_front(study, target_names=names)) if len(names) > 1
            else (lambda: ovm.plot_optimization_history(study)),
            "param_importances.png": lambda: ovm.plot_param_importances(study, target=lambda t: sign * t.values[0],
                                                                        target_name=first),
            "slice.png": lambda: ovm.plot_slice(study, target=lambda t: sign * t.values[0], target_name=first)}
    not_drawn = {}
    for fname, plot in draw.items():
        try:
            with quiet_optuna():
                plot()
            plt.gcf().savefig(out_dir / fname, dpi=80, bbox_inches="tight")
            parent.log_file(out_dir / fname)
        except Exception as e:  # noqa: BLE001 - e.g. importances need 2+ complete trials with varied params
            log.warning("no %s: %s", fname, e)
            not_drawn[fname] = str(e)[:500]
        finally:
            plt.close("all")
    return not_drawn


def search_note(study_name: str, completed: int, recommendation: str, warm_start: str | None = None,
                table: list[str] = ()) -> str:
    """The study parent's description (MLflow's note): its links and the trials' table (above
    MLflow's fold), the warm start's line when the study began from a profile's predictions,
    then the recommendation and its Pareto front."""
    return "\n".join([f"**rlbench search** study `{study_name}` · {completed} complete trials",
                      *(["", *table] if table else []), *(["", warm_start] if warm_start else []),
                      "", "```", recommendation, "```"])
