"""What the MLflow UI opens on when a user follows rlbench's links: saved views of the runs table.

One shared view (the experiment tag `mlflow.sharedViewState.<key>`) per sweep or search and one
per job, and links that carry `workflowType=machine_learning`. What a view holds, and what no
link can set in MLflow 3.17: docs/metrics.md, "In the MLflow UI".
"""

from __future__ import annotations

import json
import urllib.parse

from rlbench.tracking.unmeasured import DERIVED

SHARE_PREFIX = "mlflow.sharedViewState."
HEADLINE = ("runtime_s", "task_fps", "fps", "energy_per_task_j")  # the headline numbers, in this order
BOUND_TAG = "bound"          # a job's bottleneck in words (rlbench.core.bound.bottleneck)
NOT_MEASURED = "not measured"  # a tag named after a headline metric the job could not measure
VIEW = "workflowType=machine_learning"  # MLflow 3's "Model training" view, not its GenAI one
REPEAT_GROUP = "repeat_group"  # the tag naming the configuration a repeat runs (rlbench/sweeps/sweep.py)
VERDICT_TAG = "verdict"  # a sweep's job: best, not told apart from best, or slower (tracking/parent_note.py verdicts)


def _col(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"  # the UI's canonical column key


def _bar(metric: str) -> dict:
    return {"type": "BAR", "uuid": f"rlbench-bar-{metric}", "metricKey": metric, "metricSectionId": "rlbench-headline",
            "isGenerated": False, "deleted": False, "runsCountToCompare": 100}


def grouped(tag: str) -> dict:
    """MLflow's own "Group by" the run tag `tag`: a row per value (its runs' average), its runs
    below it (a group is open unless `groupsExpanded` closes it), and the charts plotting each
    group's average (a bar per group; MLflow draws a group's min..max band only on a metric's
    history over steps). Average, as MLflow 3.17 aggregates by min, average or max only (no
    median); the summary and the report give the medians and the spread."""
    return {"groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": tag}]},
            "groupsExpanded": {}, "useGroupedValuesInCharts": True}


def view_state(search_filter: str, knobs: list[str], measured: set[str], parallel: bool = True,
               group_by_tag: str | None = None, tags: tuple[str, ...] = ()) -> dict:
    """The runs table filtered by `search_filter`, sorted by runtime_s (shortest task first), with
    the columns: the swept `knobs` (params), the headline metrics (a tag column reading "not
    measured ..." for a headline metric no job logged), the bound; the run tags `tags` (a sweep's
    VERDICT_TAG) first of the tag columns, in sight; the chart view's first section: a bar per headline metric, then
    (`parallel`: several runs) the knobs and rates in parallel coordinates. With `group_by_tag` (a sweep's repeats), the runs grouped by that tag
    (`grouped`), so that configurations compare by their aggregate and spread."""
    metrics = [m for m in HEADLINE if m in measured]
    unmeasured = [m for m in HEADLINE if m not in measured]
    columns = ([_col("params", k) for k in knobs] + [_col("metrics", m) for m in metrics]
               + [_col("tags", t) for t in (*tags, *unmeasured, BOUND_TAG)])  # the UI shows params, metrics, tags
    charts = [_bar(m) for m in metrics]
    if knobs and parallel:  # the last axis is the colour scale: the task's time
        charts.append({"type": "PARALLEL", "uuid": "rlbench-parallel", "metricSectionId": "rlbench-headline",
                       "isGenerated": False, "deleted": False, "runsCountToCompare": 100, "showAllRuns": True,
                       "selectedParams": list(knobs),
                       "selectedMetrics": [m for m in ("fps", "task_fps", "runtime_s") if m in measured]})
    state = {"searchFilter": search_filter, "orderByKey": _col("metrics", "runtime_s"), "orderByAsc": True,
             "selectedColumns": columns, "columnOrder": columns,
             "columnWidths": {_col("tags", t): 300 for t in (*unmeasured, *tags)} | {_col("tags", BOUND_TAG): 170},
             "compareRunCharts": charts, "isAccordionReordered": True, "hideEmptyCharts": True,
             "compareRunSections": [{"uuid": "rlbench-headline", "name": "rlbench headline: the task's time and rates",
                                     "display": True, "isReordered": True, "deleted": False, "isGenerated": False}]}
    return (state | grouped(group_by_tag)) if group_by_tag else state


def not_measured(metric: str, reasons: dict[str, str]) -> str:
    """The tag a job writes for a headline metric it could not measure: the reasons of what it
    derives from first (what a column of ~45 characters shows), its own last."""

    parts = [f"{src}: {reasons[src]}" for src in DERIVED.get(metric, ()) if src in reasons]
    own = reasons.get(metric)
    return f"{NOT_MEASURED}: " + ("; ".join(parts + ([own] if own else [])) or "no value recorded")


def share_view(experiment_id: str, key: str, state: dict) -> str:
    """Store the view as the experiment's shared view `key` (in the current tracking store); returns the key."""
    import mlflow  # lazy: keeps mlflow off the start

    mlflow.MlflowClient().set_experiment_tag(experiment_id, SHARE_PREFIX + key, json.dumps(state, separators=(",", ":")))
    return key


def view_link(experiment_id: str, key: str | None, chart: bool = False) -> str:
    """The UI's address of a shared view, relative (`#/...`): the table, or with `chart` its chart
    view; no key: the experiment's runs as the browser last left them."""
    share = f"viewStateShareKey={urllib.parse.quote(key)}&" if key else ""
    mode = "&compareRunsMode=CHART" if chart else ""
    return f"#/experiments/{experiment_id}/runs?{share}{VIEW}{mode}"


def job_view(experiment_id: str, run_id: str, knobs: list[str], measured: set[str]) -> str:
    """A job's own chart view (its headline numbers first); returns its relative link."""
    key = share_view(experiment_id, f"rlbench-job-{run_id}",
                     view_state(f"attributes.run_id = '{run_id}'", knobs, measured, parallel=False))
    return view_link(experiment_id, key, chart=True)


def runs_view_key(parent_id: str) -> str:
    """The shared view's key of a sweep's or search's jobs (runs_view), which links name."""
    return f"rlbench-{parent_id}"


def runs_view(experiment_id: str, parent_id: str, knobs: list[str], measured: set[str],
              group_by_tag: str | None = None, tags: tuple[str, ...] = ()) -> str:
    """A sweep's or search's jobs (the parent's children) as a shared view, grouped by
    `group_by_tag` if given, with the tag columns `tags` (view_state); returns its key."""
    state = view_state(f"tags.mlflow.parentRunId = '{parent_id}'", knobs, measured, group_by_tag=group_by_tag, tags=tags)
    return share_view(experiment_id, runs_view_key(parent_id), state)


def _param_of(key: str, params: set[str]) -> str | None:
    return next((n for n in (key, f"{key}.name", f"{key}.id") if n in params), None)


def knobs_of(jobs: list[list[str]], params: set[str], varying: bool = True) -> list[str]:
    """The params a grid sets: override keys (whose value differs between jobs, with `varying`)
    as their param names (`actors`; a config group `algo=vtrace` is the param `algo.name`,
    `env=pong` is `env.id`), in override order; where results go and how progress shows are not knobs."""
    values: dict[str, set[str]] = {}
    for job in jobs:
        for o in job:
            key, _, value = o.partition("=")
            values.setdefault(key.lstrip("+~"), set()).add(value)
    knobs = []
    for key, seen in values.items():
        if (varying and len(seen) < 2) or key.startswith(("hydra", "tracking.", "progress")):
            continue
        name = _param_of(key, params)
        if name is not None and name not in knobs:
            knobs.append(name)
    return knobs
