"""What the MLflow UI opens on when a user follows rlbench's links: saved views of the runs table.

One shared view (the experiment tag `mlflow.sharedViewState.<key>`) per sweep or search and one
per job, and links that carry `workflowType=machine_learning`. What a view holds, and what no
link can set in MLflow 3.17: docs/metrics.md, "In the MLflow UI".
"""

from __future__ import annotations

import json
import logging
import urllib.parse

from rlbench.core.metrics import TASK_ELAPSED
from rlbench.tracking.unmeasured import DERIVED

log = logging.getLogger(__name__)
SHARE_PREFIX = "mlflow.sharedViewState."
TAG_LIMIT = 20_000  # MLflow 3.17's longest experiment tag value (MAX_EXPERIMENT_TAG_VAL_LENGTH)
HEADLINE = ("runtime_s", "task_fps", "fps", "energy_per_task_j")  # the headline numbers, in this order
BOUND_TAG = "bound"  # a job's bottleneck in words (rlbench.core.bound.bottleneck)
NOT_MEASURED = "not measured"  # a tag named after a headline metric the job could not measure
VIEW = "workflowType=machine_learning"  # MLflow 3's "Model training" view, not its GenAI one
REPEAT_GROUP = "repeat_group"  # the tag naming the configuration a repeat runs (rlbench/sweeps/sweep.py)
VERDICT_TAG = "verdict"  # a sweep's job or a search's trial run: best, not told apart from best, or slower;
# on a sweep's parent: the verdict's answer, beside BEST_TAG, its best configuration (rlbench/sweeps/sweep.py)
BEST_TAG = "best"


def _col(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"  # the UI's canonical column key


def grouped(tag: str) -> dict:
    """MLflow's own "Group by" the run tag `tag`: a row per value, its runs below it (a group is
    open unless `groupsExpanded` closes it). MLflow 3.17 aggregates by min, average or max only
    (no median): rlbench's UI app writes the group row's median over its average (ui_app.py
    group_rows_script), and the charts plot each run, not each group's average (which no script
    reaches), so that no second centre value shows; the summary and the report give the medians
    and the spread."""
    return {
        "groupBy": {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": tag}]},
        "groupsExpanded": {},
        "useGroupedValuesInCharts": False,
    }


def view_state(
    search_filter: str,
    knobs: list[str],
    measured: set[str],
    parallel: bool = True,
    group_by_tag: str | None = None,
    tags: tuple[str, ...] = (),
) -> dict:
    """The runs table filtered by `search_filter`, sorted by runtime_s (shortest task first), with
    the columns: the swept `knobs` (params), the headline metrics (a tag column reading "not
    measured ..." for a headline metric no job logged), the bound; the run tags `tags` (a sweep's
    VERDICT_TAG) first of the tag columns, in sight; the chart view's first section: a bar per headline metric, then
    (`parallel`: several runs) the knobs and rates in parallel coordinates. With `group_by_tag` (a
    sweep's repeats), the runs grouped by that tag
    (`grouped`), so that configurations compare by their aggregate and spread."""
    metrics = [m for m in HEADLINE if m in measured]
    unmeasured = [m for m in HEADLINE if m not in measured]
    columns = (
        [_col("params", k) for k in knobs]
        + [_col("metrics", m) for m in metrics]
        + [_col("tags", t) for t in (*tags, *unmeasured, BOUND_TAG)]
    )  # the UI shows params, metrics, tags
    charts = [_card("BAR", m, "rlbench-headline") for m in metrics]
    if knobs and parallel:  # the last axis is the colour scale: the task's time
        charts.append(
            {
                "type": "PARALLEL",
                "uuid": "rlbench-parallel",
                "metricSectionId": "rlbench-headline",
                "isGenerated": False,
                "deleted": False,
                "runsCountToCompare": 100,
                "showAllRuns": True,
                "selectedParams": list(knobs),
                "selectedMetrics": [m for m in ("fps", "task_fps", "runtime_s") if m in measured],
            }
        )
    state = {
        "searchFilter": search_filter,
        "orderByKey": _col("metrics", "runtime_s"),
        "orderByAsc": True,
        "selectedColumns": columns,
        "columnOrder": columns,
        # `not measured (hover: why)` (rlbench's UI app); a group row's `<median> (median of n)`
        "columnWidths": {_col("tags", t): 300 for t in tags}
        | {_col("tags", t): 170 for t in (*unmeasured, BOUND_TAG)}
        | ({_col("metrics", m): 175 for m in metrics} if group_by_tag else {}),
        "compareRunCharts": charts,
        "isAccordionReordered": True,
        "hideEmptyCharts": True,
        "compareRunSections": [_section("rlbench-headline", "rlbench headline: the task's time and rates")],
    }
    return (state | grouped(group_by_tag)) if group_by_tag else state


OP_FRAC, WINDOW = "op_frac/", "window/"  # the operation shares and the windowed rates: their own sections
MAJOR_SHARE = 0.05  # an operation charted: this share of its role's wall time in some run (as a job's note lists)
OP_SECTION = (
    f"op_frac: each role's operations of >= {MAJOR_SHARE:.0%} of its wall time in some job, as shares of it "
    "(every operation: a job's operations.png)"
)
Latest = dict[str, tuple[float, int]]  # a run's metrics: key -> (last value, its step)


def same_everywhere(latest: list[Latest]) -> set[str]:
    """The metrics that every one of (at least two) runs logged with one last value, at any step:
    the candidates for a constant (a series among them has one value only if its history says so)."""
    if len(latest) < 2:
        return set()
    return {k for k in set.intersection(*(set(r) for r in latest)) if len({r[k][0] for r in latest}) == 1}


def _card(kind: str, key: str, section: str, **config) -> dict:
    return {
        "type": kind,
        "uuid": f"rlbench-{kind.lower()}-{key}",
        "metricKey": key,
        "metricSectionId": section,
        "isGenerated": False,
        "deleted": False,
        "runsCountToCompare": 100,
    } | config


def _section(uuid: str, name: str, **layout) -> dict:
    return {
        "uuid": uuid,
        "name": name,
        "display": True,
        "isReordered": True,
        "deleted": False,
        "isGenerated": False,
    } | layout


def op_share_cards(major: set[str]) -> list[dict]:
    """A bar chart per operation share (`op_frac/<role>/<op>`) in `major`: MLflow 3.17's chart card
    names each run's (or group's) bar in its legend for one metric only (a card of several
    metrics draws them unnamed: it passes displayRunNames false), so one operation a card."""
    return [
        _card("BAR", k, "rlbench-op-frac", displayName=f"{k}: share of the role's wall time")
        for k in sorted(k for k in major if k.startswith(OP_FRAC) and k.count("/") == 2)
    ]


def window_cards(keys: set[str]) -> list[dict]:
    """A line chart per `window/*` series over the seconds since the task started: its x axis the
    metric `task_elapsed_s` (logged at each tick with the same step), which names the axis."""
    return [
        _card(
            "LINE",
            k,
            "rlbench-window",
            xAxisKey="metric",
            selectedXAxisMetricKey=TASK_ELAPSED,
            useGlobalXaxisKey=False,
            scaleType="linear",
            xAxisScaleType="linear",
            lineSmoothness=0,
            useGlobalLineSmoothing=False,
            range={},
            displayPoints=True,
        )
        for k in sorted(keys)
        if k.startswith(WINDOW)
    ]


MORE_SECTION = "more: every other metric the jobs logged (folded: open it to compare them)"


def more_cards(keys: set[str], series: set[str]) -> list[dict]:
    """A card per metric of `keys`, in the folded section "more": a line over the steps for a
    series (`series`), a bar per run for a final value."""
    return [
        _card("LINE", k, "rlbench-more", xAxisKey="step", scaleType="linear", lineSmoothness=0, range={})
        if k in series
        else _card("BAR", k, "rlbench-more")
        for k in sorted(keys)
    ]


def chart_sections(
    keys: set[str], constant: set[str], major: set[str] = frozenset(), series: set[str] | None = None
) -> tuple[list[dict], list[dict]]:
    """The chart view's cards and sections after the headline, for runs that logged `keys`: the
    `major` operation shares (major_shares), the window series on seconds, and (`series` given:
    the metrics logged as series) every other metric in a folded section "more", so that MLflow
    adds no "Model metrics" section of its own; and a deleted card (MLflow generates a card for
    every metric without one, `deleted` or not) for each `constant` metric, each other operation
    share and the x axis `task_elapsed_s`."""
    shown = keys - constant
    ops, windows = op_share_cards(major & shown), window_cards(shown)
    drawn = {c["metricKey"] for c in ops + windows}
    hidden = sorted(
        (constant | {k for k in keys if k.startswith(OP_FRAC) and k not in drawn} | ({TASK_ELAPSED} & keys))
        - set(HEADLINE)
    )
    more = more_cards(shown - drawn - set(hidden) - set(HEADLINE), series) if series is not None else []
    cards = (
        ops
        + windows
        + more
        + [{"type": "BAR", "uuid": f"rlbench-hidden-{k}", "metricKey": k, "deleted": True} for k in hidden]
    )
    sections = (
        ([_section("rlbench-op-frac", OP_SECTION)] if ops else [])
        + ([_section("rlbench-window", "window: rates over the task's seconds (task_elapsed_s)")] if windows else [])
        + ([_section("rlbench-more", MORE_SECTION) | {"display": False}] if more else [])
    )
    return cards, sections


def with_charts(
    state: dict, keys: set[str], constant: set[str], major: set[str] = frozenset(), series: set[str] | None = None
) -> dict:
    """`state` (view_state) with chart_sections after its headline; without the folded "more"
    section where that would not fit in an experiment tag (MLflow: 20,000 characters), and
    `state` alone (and a warning) where even that would not."""
    for more in (series, None) if series is not None else (None,):
        cards, sections = chart_sections(keys, constant, major, more)
        charted = state | {
            "compareRunCharts": state["compareRunCharts"] + cards,
            "compareRunSections": state["compareRunSections"] + sections,
        }
        if len(_json(charted)) <= TAG_LIMIT:
            return charted
    log.warning(
        "the chart view's sections left out: %d characters, over an experiment tag's %d", len(_json(charted)), TAG_LIMIT
    )
    return state


def not_measured(metric: str, reasons: dict[str, str]) -> str:
    """The tag a job writes for a headline metric it could not measure: the reasons of what it
    derives from first (what a column of ~45 characters shows), its own last."""

    parts = [f"{src}: {reasons[src]}" for src in DERIVED.get(metric, ()) if src in reasons]
    own = reasons.get(metric)
    return f"{NOT_MEASURED}: " + ("; ".join(parts + ([own] if own else [])) or "no value recorded")


def logged_metrics(experiment_id: str, search_filter: str) -> tuple[set[str], set[str], set[str], set[str]]:
    """What the runs `search_filter` selects logged, from the current tracking store: the metric
    keys, those with one value in every run (at least two runs; a series only if every point of
    every run's history has it), the major operation shares (major_shares) and the series (a
    metric some run logged last at a step past 0)."""
    import mlflow  # lazy: keeps mlflow off the start

    client = mlflow.MlflowClient()
    runs = client.search_runs([experiment_id], search_filter, max_results=1000)
    latest = [{m.key: (m.value, m.step) for m in r.data.to_proto().metrics} for r in runs]
    constant = {
        k
        for k in same_everywhere(latest)
        if all(r[k][1] == 0 for r in latest) or _one_value(client, [r.info.run_id for r in runs], k)
    }
    series = {k for r in latest for k, (_, step) in r.items() if step > 0}
    return {k for r in latest for k in r}, constant, major_shares(latest), series


def major_shares(latest: list[Latest]) -> set[str]:
    """The operation shares (`op_frac/<role>/<op>`) at MAJOR_SHARE or more of their role's wall time in some run."""
    return {k for r in latest for k, (v, _) in r.items() if k.startswith(OP_FRAC) and v >= MAJOR_SHARE}


def _one_value(client, run_ids: list[str], key: str) -> bool:
    return len({p.value for run_id in run_ids for p in client.get_metric_history(run_id, key)}) == 1


def _json(state: dict) -> str:
    return json.dumps(state, separators=(",", ":"))


def share_view(experiment_id: str, key: str, state: dict) -> str:
    """Store the view as the experiment's shared view `key` (in the current tracking store); returns the key."""
    import mlflow  # lazy: keeps mlflow off the start

    mlflow.MlflowClient().set_experiment_tag(experiment_id, SHARE_PREFIX + key, _json(state))
    return key


def view_link(experiment_id: str, key: str | None, chart: bool = False) -> str:
    """The UI's address of a shared view, relative (`#/...`): the table, or with `chart` its chart
    view; no key: the experiment's runs as the browser last left them."""
    share = f"viewStateShareKey={urllib.parse.quote(key)}&" if key else ""
    mode = "&compareRunsMode=CHART" if chart else ""
    return f"#/experiments/{experiment_id}/runs?{share}{VIEW}{mode}"


def job_view(experiment_id: str, run_id: str, knobs: list[str], measured: set[str]) -> str:
    """A job's own chart view (its headline numbers first); returns its relative link."""
    search_filter = f"attributes.run_id = '{run_id}'"
    key = share_view(
        experiment_id,
        f"rlbench-job-{run_id}",
        with_charts(
            view_state(search_filter, knobs, measured, parallel=False), *logged_metrics(experiment_id, search_filter)
        ),
    )
    return view_link(experiment_id, key, chart=True)


def runs_view_key(parent_id: str) -> str:
    """The shared view's key of a sweep's or search's jobs (runs_view), which links name."""
    return f"rlbench-{parent_id}"


def runs_view(
    experiment_id: str,
    parent_id: str,
    knobs: list[str],
    measured: set[str],
    group_by_tag: str | None = None,
    tags: tuple[str, ...] = (),
) -> str:
    """A sweep's or search's jobs (the parent's children) as a shared view, grouped by
    `group_by_tag` if given, with the tag columns `tags` (view_state); returns its key."""
    search_filter = f"tags.mlflow.parentRunId = '{parent_id}'"
    state = view_state(search_filter, knobs, measured, group_by_tag=group_by_tag, tags=tags)
    return share_view(
        experiment_id, runs_view_key(parent_id), with_charts(state, *logged_metrics(experiment_id, search_filter))
    )


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
