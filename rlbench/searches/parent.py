"""The study's parent run: found or opened once per study, and at the end of every run of the
command given the best trial(s), the Pareto front, plots and the trials CSV (through the
tracking port: a tracking.parent.ParentRun, or a test's fake). docs/metrics.md, "Search parent run"."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import optuna

from rlbench.config.schema import SearchConfig
from rlbench.core.verdict import COMPARED, DEFAULT_METRIC, NO_GPU_RATIO, Result, against, judge_runs
from rlbench.searches.space import KNOBS, RAN_AS, knob_text
from rlbench.searches.study import complete, quiet_optuna
from rlbench.tracking.parent_note import TABLE_METRICS, artifact_link, jobs_table
from rlbench.tracking.readers import study_tags
from rlbench.tracking.study_records import without_gpu
from rlbench.tracking.unmeasured import TAG as UNMEASURED
from rlbench.tracking.unmeasured import format_unmeasured
from rlbench.tracking.views import VERDICT_TAG, runs_view_key, view_link

log = logging.getLogger(__name__)
REPEATS_KEY = "search.repeats"  # what the verdict's advice names in a search (a sweep's: repeats)


def study_params(search, job: list[str]) -> dict:
    """What a new study's parent records as its parameters, as a sweep's records its grid: the
    line every trial runs, the trials asked for, the space, the sampler's seed."""
    return {
        "job": " ".join(job)[:6000] or "(none)",
        "n_trials": search.n_trials,
        "sampler_seed": search.seed,
        "space": f"actors={list(search.actors)} actor_threads={list(search.actor_threads)} "
        f"sm_limit={list(search.sm_limit)}",
    }


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
    cols = list(zip(*(t.values for t in front), strict=True))
    spans = [(min(c), max(c)) for c in cols]

    def regret(t):
        r = 0.0
        for v, (lo, hi), d in zip(t.values, spans, directions, strict=True):
            x = (v - lo) / (hi - lo) if hi > lo else 0.0
            r += (1 - x if d == "maximize" else x) ** 2
        return r

    return min(front, key=regret)


def ran_knobs(t) -> dict:
    """A trial's knobs by the command line's names (space.py KNOBS) with the values its jobs ran
    (their metrics actor_threads_used and sm_granted: trials.py RAN), not those Optuna proposed,
    so that passing them reproduces its run; None where its runs did not log one."""
    ran = t.user_attrs.get("ran") or {}
    return {"actors": t.params.get("actors"), **{k: ran.get(metric) for k, metric in RAN_AS.items()}}


def asked_knobs(t) -> dict:
    """A trial's knobs as Optuna proposed them (its run's name, trials.py trial_overrides)."""
    return {k: t.params[k] for k in KNOBS if k in t.params}


def asked_otherwise(t) -> dict:
    """The knobs of a COMPLETE trial whose jobs ran other values than Optuna proposed: as proposed."""
    asked = asked_knobs(t)
    return {k: asked[k] for k, v in ran_knobs(t).items() if k in asked and v != asked[k]}


def trial_label(t) -> str:
    """`trial 3: actors=12 actor_threads=1 sm_limit=1`: a COMPLETE trial by its knobs as it ran
    (ran_knobs), then, where Optuna proposed others, `(asked actor_threads=4)`; else as proposed."""
    if not t.user_attrs.get("ran"):
        return f"trial {t.number}: {knob_text(asked_knobs(t))}"
    other = asked_otherwise(t)
    return f"trial {t.number}: {knob_text(ran_knobs(t))}" + (f" (asked {knob_text(other)})" if other else "")


def verdict_metric(search: SearchConfig, metric: str) -> str:
    """What the search's verdict compares: its first objective where the verdict rule can
    (core/verdict.py COMPARED), else the sweeps' setting `verdict.metric`."""
    return search.objectives[0] if search.objectives and search.objectives[0] in COMPARED else metric


def trial_result(done: list, metric: str, floor_min: float = 0.0) -> Result:
    """The search's Result, computed once: the verdict rule (core/verdict.py judge) over the
    COMPLETE trials' runs: each trial a configuration, its runs its repeats (search.repeats), so
    the noise floor is theirs (with one run each, for a steady rate, its steady windows')."""
    runs = {trial_label(t): t.user_attrs.get("runs") or [] for t in done}
    return Result(judge_runs(runs, metric, floor_min, dict.get))


def recommendation_lines(
    best, front: list, names: list[str], r: Result | None = None, ratios: bool = True, code=str
) -> list[str]:
    """The recommended trial's knobs as it ran (to paste into a command), the trials not told
    apart from it (r: the Result over the trials' runs), the verdict's answer and, with two
    objectives or more, the other front points; the lines that detail the one above them
    indented by two spaces. ratios=False: the trials ran without a GPU (the report's rule,
    study_records.without_gpu). `code` marks a name (plain for the terminal; the note's: `inline code`)."""
    vals = ", ".join(f"{n}={x:.4g}" for n, x in zip(names, best.values, strict=True))
    runs = len(best.user_attrs.get("runs") or [None])
    ratio = f" -> cpu_gpu_ratio={_g4(best.user_attrs.get('cpu_gpu_ratio'))}" if ratios else ""
    median = f"median of {runs} runs; " if runs > 1 else ""
    other = asked_otherwise(best)
    asked = f"; asked {knob_text(other)}" if other else ""
    lines = [f"recommended: {code(knob_text(ran_knobs(best)))}{ratio} ({vals}; {median}trial {best.number}{asked})"]
    if not ratios:
        lines.append(NO_GPU_RATIO)
    v = r.verdict if r is not None else None
    if v is not None and v.best is not None:
        comps = against(v, trial_label(best))
        tied = [c for c in comps if c.told_apart is False]
        said = ", ".join(code(c.name) for c in tied)
        lines += [f"not told apart from it ({v.floor_text()}): {said}"] if tied else []
        lines += [f"  {c.text}" for c in tied]
        lines.append(f"verdict: {v.answer(REPEATS_KEY)}")
    for t in front if len(names) > 1 else ():
        if t.number != best.number:
            diffs = ", ".join(
                f"{n} {100 * (x / b - 1):+.1f}%" for n, x, b in zip(names, t.values, best.values, strict=True) if b
            )
            lines.append(f"  front {code(trial_label(t))}: {diffs} vs recommended")
    return lines


def recommendation_text(best, front: list, names: list[str], r: Result | None = None, ratios: bool = True) -> str:
    """The recommendation as the terminal prints it (recommendation_lines, plain)."""
    return "\n".join(recommendation_lines(best, front, names, r, ratios))


def markdown_lines(lines: list[str]) -> list[str]:
    """Lines as markdown that wraps (MLflow's description cuts a code block at its right edge):
    each a paragraph, a line indented by two spaces an item of a list under the one above."""
    out: list[str] = []
    for line in lines:
        item = line.startswith("  ")
        if not (item and out and out[-1].startswith("- ")):
            out.append("")
        out.append(f"- {line.strip()}" if item else line)
    return out


def recommended_set(best, r: Result) -> list[str]:
    """The recommended trial and those the verdict does not tell apart from it, as they ran."""
    return [trial_label(best), *(c.name for c in against(r.verdict, trial_label(best)) if c.told_apart is False)]


def report(
    study: optuna.Study,
    search: SearchConfig,
    parent,
    experiment,
    out_dir: Path,
    labels: list[str] | None = None,
    judging: tuple[str, float] = (DEFAULT_METRIC, 0.0),
) -> str | None:
    """Best trial(s), plots and the trials CSV on the parent run, each COMPLETE trial's verdict on
    its runs (mark_verdicts, through the experiment: tracking.experiment.Experiment); returns the
    recommendation. labels: the objectives as shown ("(estimate)" after an estimated one); their
    names if None. judging: the sweeps' verdict settings (verdict.metric, verdict.noise_floor_min)."""
    names = list(search.objectives)
    labels = list(labels or names)
    out_dir.mkdir(parents=True, exist_ok=True)
    study.trials_dataframe().to_csv(out_dir / "trials.csv", index=False)
    parent.log_file(out_dir / "trials.csv")
    done = complete(study)
    if not done:
        return None
    front = study.best_trials  # COMPLETE trials only: a recommended configuration always ran
    best = recommend(front, list(search.directions))
    r = trial_result(done, verdict_metric(search, judging[0]), judging[1])
    mark_verdicts(experiment, done, r)
    ratios = not without_gpu((t.user_attrs.get("ran") or {}).get("compute_unit") for t in done)
    parent.set_tags(
        {f"best_{RAN_AS.get(k, k)}": str(x) for k, x in ran_knobs(best).items()}  # docs/metrics.md's names
        | {
            "best_cpu_gpu_ratio": _g4(best.user_attrs.get("cpu_gpu_ratio")) if ratios else "not compared (no GPU)",
            "best_trial": str(best.number),
            "best_set": "; ".join(recommended_set(best, r)),
            "verdict": r.verdict.answer(REPEATS_KEY),
            "pareto_front_trials": " ".join(str(t.number) for t in front),
        }
    )
    parent.log_metrics({f"best_{n}": x for n, x in zip(names, best.values, strict=True)})
    not_drawn = plots(study, labels, out_dir, parent, list(search.directions))
    if not_drawn:
        parent.set_tags({UNMEASURED: format_unmeasured(not_drawn)})
    said = recommendation_lines(best, front, labels, r, ratios, code=lambda name: f"`{name}`")
    warm = parent.tags().get("warm_start_note")  # rlbench/searches/warm_start.py
    ratio = "cpu_gpu_ratio" if ratios else "cpu_gpu_ratio (no GPU: not compared)"  # the report leaves it out
    table = jobs_table(trial_rows(study), parent.experiment_id, [*labels, ratio], (*TABLE_METRICS, "cpu_gpu_ratio"))
    parent.describe(
        search_note(study.study_name, len(done), markdown_lines(said), warm, table, links(parent, len(names)))
    )
    return recommendation_text(best, front, labels, r, ratios)


def trial_verdicts(done: list, r: Result) -> dict[str, dict[str, str]]:
    """The tag VERDICT_TAG (tracking/views.py) of each run of the COMPLETE trials `done`, by run id:
    its trial's label by the verdict rule (`best; noise floor 7.4%`, ...: Result.label), as `r`
    labels it; a trial it did not judge is left out."""
    return {
        run["run_id"]: {VERDICT_TAG: text}
        for t in done
        if (text := r.label(trial_label(t))) is not None
        for run in t.user_attrs.get("runs") or []
        if run.get("run_id")
    }


def mark_verdicts(experiment, done: list, r: Result) -> None:
    """Each run of the COMPLETE trials tagged with its trial's verdict (trial_verdicts), judged over
    every COMPLETE trial of the study, so that a trial of an earlier run of the command gets the
    verdict the later trials changed. A warning if the tags cannot be written: the trials' record stands."""
    try:
        experiment.tag_runs(trial_verdicts(done, r))
    except Exception as e:  # noqa: BLE001 - the trials' record stands without it
        log.warning("could not tag the trials' verdicts: %s", e)


def _g4(v) -> str:
    return f"{v:.4g}" if isinstance(v, int | float) else str(v)


_STATUS = {
    "COMPLETE": "FINISHED",
    "FAIL": "FAILED",
    "PRUNED": "KILLED (pruned)",
    "RUNNING": "RUNNING",
    "WAITING": "NOT STARTED",
}


def trial_rows(study: optuna.Study) -> list[dict]:
    """Rows for the parent's jobs table: a COMPLETE trial's runs (with search.repeats, one row each,
    told by the trial: the table gives their medians and range), else one row per trial; each
    with its knobs as it ran, its run, its headline numbers and cpu_gpu_ratio."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        name, status, runs = trial_label(t), _STATUS[t.state.name], t.user_attrs.get("runs")
        if t.state.name == "COMPLETE" and runs:
            rows += [{"name": name, "config": name, "status": status, **r} for r in runs]
            continue
        rows.append(
            {
                "name": name,
                "config": name,
                "run_id": t.user_attrs.get("run_id"),
                "status": status,
                **t.user_attrs.get("headline", {}),
                "cpu_gpu_ratio": t.user_attrs.get("cpu_gpu_ratio"),
            }
        )
    return rows


def front_figure(objectives: int) -> str:
    """The first figure's file: the Pareto front with two objectives or more, else the optimisation history."""
    return "pareto_front.png" if objectives > 1 else "optimisation_history.png"


def links(parent, objectives: int = 2) -> str:
    """The description's links (on its first line): the trials' table and charts, the Pareto
    front (two objectives or more) or the optimisation history (one), trials.csv."""
    exp, key = parent.experiment_id, runs_view_key(parent.run_id)
    figure = "Pareto front" if objectives > 1 else "Optimisation history"
    return (
        f"[Jobs table]({view_link(exp, key)}) · [Charts]({view_link(exp, key, chart=True)}) · "
        f"[{figure}]({artifact_link(exp, parent.run_id, front_figure(objectives))}) · "
        f"[trials.csv]({artifact_link(exp, parent.run_id, 'trials.csv')})"
    )


def readable(fig) -> None:
    """Optuna's figures made readable: the x ticks turned so that long values do not run into each
    other, an axis of integers (a knob, the trials' numbers and their colour bar) ticked at
    integers (integer_ticks), and the trials coloured on a scale with no white end (its Blues
    draws the first trials white on white)."""
    from matplotlib.ticker import MaxNLocator, NullFormatter  # lazy: keeps matplotlib off the start

    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":  # the trials' numbers (Trial 0 ... n)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
            continue
        ax.tick_params(axis="x", labelrotation=45)
        ax.xaxis.set_minor_formatter(NullFormatter())  # a log axis's 7x10^0, 8x10^0 ... ran into each other
        if ax.get_xlabel() in (*KNOBS, "Trial"):
            integer_ticks(ax.xaxis)
        for points in ax.collections:
            if points.get_array() is not None:
                points.set_cmap("viridis")


def integer_ticks(axis) -> None:
    """A matplotlib axis of integers ticked as plain numbers: on a log scale (actors) at 1, 2 and
    5 x 10^k where two of those fall in its range (log_steps), else at up to 5 integers (a log
    axis from 3 to 29 had the one label 10^1; a trial's number 0.5)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator  # lazy: keeps matplotlib off the start

    log = axis.get_scale() == "log" and len(log_steps(*axis.get_view_interval())) >= 2
    steps = LogLocator(subs=(1.0, 2.0, 5.0)) if log else MaxNLocator(nbins=5, integer=True, min_n_ticks=1)
    axis.set_major_locator(steps)
    axis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))


def log_steps(lo: float, hi: float) -> list[float]:
    """The values 1, 2 and 5 x 10^k from lo to hi (lo > 0): 3..29 gives 5, 10, 20."""
    lo, hi = sorted((lo, hi))
    k = range(math.floor(math.log10(lo)), math.floor(math.log10(hi)) + 1)
    return [m * 10.0**e for e in k for m in (1, 2, 5) if lo <= m * 10.0**e <= hi]


def plots(
    study: optuna.Study, names: list[str], out_dir: Path, parent, directions: list[str] | None = None
) -> dict[str, str]:
    """The Pareto front (one objective: the optimisation history), the params' importances (for
    the first objective as optimised) and its slices (as measured) (Optuna's importances are for a low target: a
    maximised one is negated), drawn into out_dir and logged on the parent; returns those not
    drawn, with why. Optuna's plots set the ggplot style for the whole process: they are drawn in
    an rc_context, so figures drawn after a search (the report's) keep their own."""
    import matplotlib  # lazy: keeps matplotlib off the start

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: keeps matplotlib off the start
    import optuna.visualization.matplotlib as ovm  # lazy: keeps matplotlib off the start

    sign = -1.0 if (directions or ["minimize"])[0] == "maximize" else 1.0
    first = f"-{names[0]} (maximised)" if sign < 0 else f"{names[0]} (minimised)"
    draw = {
        front_figure(len(names)): (lambda: ovm.plot_pareto_front(study, target_names=names))
        if len(names) > 1
        else (lambda: ovm.plot_optimization_history(study, target_name=names[0])),
        "param_importances.png": lambda: ovm.plot_param_importances(
            study, target=lambda t: sign * t.values[0], target_name=first
        ),
        "slice.png": lambda: ovm.plot_slice(study, target=lambda t: t.values[0], target_name=names[0]),
    }
    not_drawn = {}
    for fname, plot in draw.items():
        try:
            with quiet_optuna(), matplotlib.rc_context():
                plot()
                readable(plt.gcf())
                plt.gcf().savefig(out_dir / fname, dpi=80, bbox_inches="tight")
            parent.log_file(out_dir / fname)
        except Exception as e:  # noqa: BLE001 - e.g. importances need 2+ complete trials with varied params
            log.warning("no %s: %s", fname, e)
            not_drawn[fname] = str(e)[:500]
        finally:
            plt.close("all")
    return not_drawn


def search_note(
    study_name: str,
    completed: int,
    recommendation: list[str],
    warm_start: str | None = None,
    table: list[str] = (),
    links_line: str | None = None,
) -> str:
    """The study parent's description (MLflow's note). MLflow 3.17 folds a description taller than
    150 px and lays a fade that takes the clicks over its lower 90 px: so its first line is what
    ran and its links, then the recommendation and its Pareto front (markdown_lines: lines that
    wrap), the trials' table, and the warm start's line when the study began from a profile's
    predictions."""
    return "\n".join(
        [
            f"**rlbench search** study `{study_name}` · {completed} complete trials"
            + (f" · {links_line}" if links_line else ""),
            *recommendation,
            *(["", *table] if table else []),
            *(["", warm_start] if warm_start else []),
        ]
    )
