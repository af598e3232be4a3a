"""The chart view a sweep's (or a job's) link opens (rlbench/tracking/views.py): no card for a
metric with one value in every run, the operation shares one chart per role, the window series
over the seconds since the task started; and the parent's job table as MLflow's description
draws it (rlbench/tracking/parent_note.py)."""

import json

import mlflow
import pytest
from mlflow.entities import Metric

from rlbench.tracking.parent_note import jobs_table, table_row
from rlbench.tracking.views import (
    TAG_LIMIT,
    chart_sections,
    logged_metrics,
    major_shares,
    runs_view,
    same_everywhere,
    view_state,
    with_charts,
)
from tests.conftest import plain_table as plain

KEYS = {
    "runtime_s",
    "fps",
    "actor_threads_used",
    "learner_flops_per_update",
    "window/fps",
    "window/sps",
    "task_elapsed_s",
    "op_frac/actors/env_step",
    "op_frac/actors/inference",
    "op_frac/actors/other",
    "op_frac/learner/forward_backward",
    "op_frac/learner/wait",
    "loss",
}


MAJOR = {"op_frac/actors/env_step", "op_frac/actors/inference", "op_frac/learner/wait"}  # >= 5% in some run


def _cards(keys=KEYS, constant=frozenset({"actor_threads_used", "learner_flops_per_update"}), major=MAJOR):
    cards, sections = chart_sections(set(keys), set(constant), set(major))
    return {c["uuid"]: c for c in cards}, sections


def test_a_metric_with_one_value_in_every_run_gets_a_deleted_card_and_the_others_none():
    """MLflow adds a card for each metric that no card names by `metricKey` (deleted or not)."""
    cards, _ = _cards()
    deleted = {c["metricKey"] for c in cards.values() if c.get("deleted")}
    assert {"actor_threads_used", "learner_flops_per_update"} <= deleted
    assert not deleted & {"loss", "fps", "runtime_s", "window/fps"}  # MLflow draws them, or the headline does
    assert same_everywhere(
        [
            {"a": (2.0, 0), "b": (1.0, 0), "c": (5.0, 3)},
            {"a": (2.0, 0), "b": (1.5, 0), "c": (5.0, 4)},
            {"a": (2.0, 0), "b": (1.0, 0), "c": (5.0, 3), "d": (1.0, 0)},
        ]
    ) == {"a", "c"}
    assert same_everywhere([{"a": (2.0, 0)}]) == set()  # one run: nothing to compare


def test_each_major_operation_share_is_a_chart_of_its_own_and_the_others_are_hidden():
    """One metric a card: MLflow 3.17 names the runs' (the groups') bars in a one-metric card's
    legend only; the operations under 5% of their role's wall time in every run are left out."""
    cards, sections = _cards()
    ops = {c["metricKey"]: c for c in cards.values() if c.get("metricSectionId") == "rlbench-op-frac"}
    assert sorted(ops) == sorted(MAJOR) and all(
        c["type"] == "BAR" and "selectedMetricKeys" not in c for c in ops.values()
    )
    hidden = {c["metricKey"] for c in cards.values() if c.get("deleted")}
    assert {k for k in KEYS if k.startswith("op_frac/")} - MAJOR <= hidden and not MAJOR & hidden
    assert any(s["uuid"] == "rlbench-op-frac" for s in sections)
    assert major_shares(
        [{"op_frac/a/x": (0.05, 0), "op_frac/a/y": (0.049, 0), "fps": (9.0, 0)}, {"op_frac/a/z": (0.5, 3)}]
    ) == {
        "op_frac/a/x",
        "op_frac/a/z",
    }


def test_the_window_series_are_drawn_over_the_seconds_since_the_task_started():
    cards, sections = _cards()
    lines = [c for c in cards.values() if c["type"] == "LINE"]
    assert sorted(c["metricKey"] for c in lines) == ["window/fps", "window/sps"]
    for c in lines:  # MLflow's line chart over another metric: that metric names the x axis
        assert (c["xAxisKey"], c["selectedXAxisMetricKey"], c["useGlobalXaxisKey"]) == (
            "metric",
            "task_elapsed_s",
            False,
        )
    assert cards["rlbench-hidden-task_elapsed_s"]["deleted"]  # the axis, not a chart of its own
    assert [s["uuid"] for s in sections] == ["rlbench-op-frac", "rlbench-window"]
    cards, sections = _cards(keys={"runtime_s", "loss"}, constant=set())
    assert cards == {} and sections == []  # nothing to add: MLflow's own cards


def test_every_other_metric_is_in_one_folded_section_so_mlflow_adds_none():
    cards, sections = chart_sections(set(KEYS), {"actor_threads_used"}, MAJOR, series={"loss", "window/fps"})
    more = {c["metricKey"]: c["type"] for c in cards if c.get("metricSectionId") == "rlbench-more"}
    assert more == {"learner_flops_per_update": "BAR", "loss": "LINE"}  # a final value, a series
    named = {c["metricKey"] for c in cards} | {"runtime_s", "fps"}  # the headline's own cards
    assert named >= KEYS  # every metric has a card: MLflow generates none
    (folded,) = [s for s in sections if s["uuid"] == "rlbench-more"]
    assert folded["display"] is False and folded["name"].startswith("more:")


def test_the_view_keeps_its_headline_first_and_fits_an_experiment_tag():
    state = view_state("x", ["actors"], {"runtime_s", "fps"})
    charted = with_charts(state, KEYS, {"actor_threads_used"}, MAJOR)
    assert charted["compareRunCharts"][: len(state["compareRunCharts"])] == state["compareRunCharts"]
    assert charted["compareRunSections"][0]["uuid"] == "rlbench-headline"
    many = {f"op_frac/actor_proc{i}/{op}" for i in range(200) for op in ("env_step", "wait_actions", "other")}
    assert with_charts(state, many, set(), many) == state  # over MLflow's 20,000 characters: the headline alone
    assert len(json.dumps(charted)) < TAG_LIMIT


def _log(client, exp: str, parent: str, name: str, metrics: list[tuple[str, float, int]]) -> None:
    run = client.create_run(exp, run_name=name, tags={"mlflow.parentRunId": parent})
    client.log_batch(run.info.run_id, metrics=[Metric(k, v, 1000 + s, s) for k, v, s in metrics])
    client.set_terminated(run.info.run_id)


def test_the_sweeps_view_hides_what_every_run_logged_alike(store):
    """From the store: a final value alike in every run, a series alike at every point; not a
    series whose last point alone is alike, nor a value one run lacks."""
    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    exp = client.create_experiment("charts")
    parent = client.create_run(exp, run_name="sweep").info.run_id
    for i, fps in enumerate((100.0, 200.0)):
        _log(
            client,
            exp,
            parent,
            f"job{i}",
            [
                ("fps", fps, 0),
                ("actor_threads_used", 2.0, 0),
                ("runtime_s", 3.0, 0),
                ("frames", 50.0 * (i + 1), 1),
                ("frames", 300.0, 2),
                ("window/replay_ratio", 4.0, 1),
                ("window/replay_ratio", 4.0, 2 + i),
                ("task_elapsed_s", 1.01, 1),
                ("task_elapsed_s", 2.02 + i, 2),
            ]
            + ([("eval_frames", 0.0, 0)] if i else []),
        )
    keys, constant, major, series = logged_metrics(exp, f"tags.mlflow.parentRunId = '{parent}'")
    assert major == set() and "eval_frames" in keys
    assert series == {"frames", "window/replay_ratio", "task_elapsed_s"}
    assert constant == {"actor_threads_used", "runtime_s", "window/replay_ratio"}
    key = runs_view(exp, parent, [], {"runtime_s"})
    state = json.loads(client.get_experiment(exp).tags["mlflow.sharedViewState." + key])
    hidden = {c["metricKey"] for c in state["compareRunCharts"] if c.get("deleted")}
    assert hidden == {"actor_threads_used", "window/replay_ratio", "task_elapsed_s"}


def test_the_job_table_keeps_each_cell_on_one_line_with_a_margin():
    """MLflow's description draws a markdown table with no cell padding and lets a cell wrap:
    "47.24, n=2)955 (846.7..." before; each cell now has two non-breaking spaces each side (as
    entities, which the table parser does not trim) and no breakable space inside."""
    row = table_row(["`actors=4` [1](#/a) [2](#/b)", "72.8 (70.1..75.3, n=3)", ""])
    assert row == (
        "| &nbsp;&nbsp;`actors=4`\u00a0[1](#/a)\u00a0[2](#/b)&nbsp;&nbsp; "
        "| &nbsp;&nbsp;72.8\u00a0(70.1..75.3,\u00a0n=3)&nbsp;&nbsp; | &nbsp;&nbsp;&nbsp;&nbsp; |"
    )
    rows = [
        {
            "job": 0,
            "name": "actors=2 env=pong",
            "status": "FINISHED",
            "runtime_s": 2.0,
            "task_fps": 10.0,
            "fps": 12.0,
            "bound": "learner 53%",
            "run_id": "a" * 32,
        }
    ]
    table = jobs_table(rows, "7")
    assert plain(table[0]) == "| job | runtime_s | task_fps | fps | energy_per_task_j | bound |"
    for line in (table[0], table[2]):
        cells = line.split(" | ")
        assert all(c.strip("| ").startswith("&nbsp;&nbsp;") and c.strip("| ").endswith("&nbsp;&nbsp;") for c in cells)
        assert " " not in line.replace(" | ", "").strip("| ")  # no space a line could break at
    assert plain(table[2]).startswith("| [actors=2 env=pong](#/experiments/7/runs/" + "a" * 32)


@pytest.mark.parametrize("labels", [None, ["energy_per_task_j (estimate)"]])
def test_a_labelled_column_stays_one_cell(labels):
    head = plain(jobs_table([], "7", labels)[0])
    assert head.endswith("| energy_per_task_j" + (" (estimate)" if labels else "") + " | bound |")
