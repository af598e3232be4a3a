"""The study's MLflow parent run: found or opened once per study, and at the end of every run
of the command given the best trial(s), the Pareto front, plots and the trials CSV."""

from __future__ import annotations

import logging
from pathlib import Path

import mlflow
import optuna

from rlbench.config.schema import SearchConfig
from rlbench.search.study import complete
from rlbench.tracking.parent import NOTE_TAG
from rlbench.tracking.unmeasured import TAG as UNMEASURED
from rlbench.tracking.unmeasured import format_unmeasured

log = logging.getLogger(__name__)

def find_or_open_parent(tracking, study_name: str) -> str:
    """The study's one MLflow parent run: reused when the study resumes."""
    from rlbench.tracking.fingerprint import host_tags
    from rlbench.tracking.parent import source_tags
    from rlbench.tracking.store import open_experiment

    exp_id = open_experiment(tracking)
    client = mlflow.MlflowClient()
    found = client.search_runs([exp_id], filter_string=f"tags.optuna_study = '{study_name}' and "
                                                       "tags.`rlbench.role` = 'study'", max_results=1)
    if found:
        return found[0].info.run_id
    run = client.create_run(exp_id, run_name=f"study {study_name}",
                            tags={**host_tags(), **source_tags("search"), "rlbench.role": "study",
                                  "optuna_study": study_name})
    return run.info.run_id


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


def report(study: optuna.Study, s: SearchConfig, parent: str, out_dir: Path) -> str | None:
    """Best trial(s), plots and the trials CSV on the parent run; returns the recommendation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as ovm

    client, names = mlflow.MlflowClient(), list(s.objectives)
    out_dir.mkdir(parents=True, exist_ok=True)
    study.trials_dataframe().to_csv(out_dir / "trials.csv", index=False)
    client.log_artifact(parent, str(out_dir / "trials.csv"))
    done = complete(study)
    if not done:
        return None
    front = study.best_trials
    best = recommend(front, list(s.directions))
    for k, v in best.params.items():
        client.set_tag(parent, f"best_{k}", str(v))
    client.set_tag(parent, "best_cpu_gpu_ratio", str(best.user_attrs.get("cpu_gpu_ratio")))
    client.set_tag(parent, "best_trial", str(best.number))
    client.set_tag(parent, "pareto_front_trials", " ".join(str(t.number) for t in front))
    for n, v in zip(names, best.values):
        client.log_metric(parent, f"best_{n}", v)
    plots = {"pareto_front.png": (lambda: ovm.plot_pareto_front(study, target_names=names)) if len(names) > 1
             else (lambda: ovm.plot_optimization_history(study)),
             "param_importances.png": lambda: ovm.plot_param_importances(study, target=lambda t: t.values[0],
                                                                         target_name=names[0]),
             "slice.png": lambda: ovm.plot_slice(study, target=lambda t: t.values[0], target_name=names[0])}
    not_drawn = {}
    for fname, draw in plots.items():
        try:
            draw()
            plt.gcf().savefig(out_dir / fname, dpi=80, bbox_inches="tight")
            client.log_artifact(parent, str(out_dir / fname))
        except Exception as e:  # noqa: BLE001 - e.g. importances need 2+ complete trials with varied params
            log.warning("no %s: %s", fname, e)
            not_drawn[fname] = str(e)[:500]
        finally:
            plt.close("all")
    if not_drawn:
        client.set_tag(parent, UNMEASURED, format_unmeasured(not_drawn))
    text = recommendation_text(best, front, names)
    warm = client.get_run(parent).data.tags.get("warm_start_note")  # rlbench/search/warm_start.py
    client.set_tag(parent, NOTE_TAG, search_note(study.study_name, len(done), text, warm))
    return text


def search_note(study_name: str, completed: int, recommendation: str, warm_start: str | None = None) -> str:
    """The study parent's description (MLflow's note): the recommendation and its Pareto front,
    and the warm start's line when the study began from a profile's predictions."""
    return "\n".join([f"**rlbench search** study `{study_name}` · {completed} complete trials",
                      *(["", warm_start] if warm_start else []), "", "```", recommendation, "```"])
