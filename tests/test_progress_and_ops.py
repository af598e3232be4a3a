"""Pure helpers: time left, op fractions with the annotation correction, op shading."""

import math

import pytest

from rlbench.core.progress import eta_s, fps_text
from rlbench.telemetry.charts.timeline import op_shares
from rlbench.telemetry.ops import calibrate_annotation, corrected_fractions, op_metrics
from rlbench.telemetry.timing import OpTimer


def test_eta_is_the_slower_half_of_the_task():
    assert eta_s(50, 100, 10.0, 5, 10, 1.0) == pytest.approx(5.0)
    assert eta_s(100, 100, 10.0, 5, 10, 0.5) == pytest.approx(10.0)
    assert math.isinf(eta_s(0, 100, 0.0, 0, 10, 1.0))
    assert eta_s(100, 100, 0.0, 10, 10, 0.0) == 0.0


def test_time_left_is_a_lower_bound_from_the_actors_before_the_first_update():
    from rlbench.core.progress import eta_text

    assert eta_text(50, 100, 10.0, 5, 10, 1.0) == "5s"
    assert eta_text(20, 100, 10.0, 0, 7, 0.0) == ">= 8s"  # the learner waits for data: the actors' half, at least
    assert eta_text(0, 100, 0.0, 0, 7, 0.0) == "?"  # nothing stepped yet
    assert eta_text(100, 100, 0.0, 3, 7, 0.0) == "?"  # actors done, learner stalled: unknown, not a bound


def test_progress_says_what_the_actors_do_when_they_tick_no_rate():
    # window/fps is logged only while the actors step: no "fps 0" in the learner's tail
    assert fps_text(500, 1000, {"window/fps": 3527.6}) == "fps 3528"
    assert fps_text(1000, 1000, {"window/learner_updates_per_s": 0.1}) == "actors done"
    assert fps_text(0, 1000, {}) == "actors starting"
    # over the line's span: a tick window in which the actors waited on a full queue shows 0
    assert fps_text(500, 1000, {"window/fps": 0.0}, rate=2560.4) == "fps 2560"


def test_corrected_fractions_remove_annotation_cost():
    # 1000 annotations of env_step; each adds 1us inside the interval and 3us in all.
    fr = corrected_fractions({"env_step": 0.501}, {"env_step": 1000}, wall_s=1.003, inner_s=1e-6, full_s=3e-6)
    assert fr["env_step"] == pytest.approx(0.5)
    assert fr["other"] == pytest.approx(0.5)


def test_op_metrics_names_and_missing_walls():
    t = OpTimer("learner")
    t.add("forward_backward", 0.3)
    t.add("wait", 0.1)
    m = op_metrics([t, OpTimer("inference")], {"learner": 1.0}, 0.0, 0.0)
    assert m == pytest.approx(
        {"op_frac/learner/forward_backward": 0.3, "op_frac/learner/wait": 0.1, "op_frac/learner/other": 0.6}
    )


def test_calibration_measures_a_positive_cost_with_inner_part_smaller():
    inner, full = calibrate_annotation(2000)
    assert 0 < inner < full < 1e-3


def test_op_shares_from_cumulative_totals():
    ticks = [
        (0.0, {"actors": {}}),
        (1.0, {"actors": {"env_step": 0.5}}),
        (3.0, {"actors": {"env_step": 1.5, "inference": 0.4}}),
    ]
    times, shares = op_shares(ticks, "actors")
    assert times == [1.0, 3.0]
    assert shares["env_step"] == pytest.approx([0.5, 0.5]) and shares["inference"] == pytest.approx([0.0, 0.2])


def test_progress_rate_is_the_frames_over_a_lines_span(monkeypatch):
    from rlbench.core.progress import Progress

    t = [100.0]
    monkeypatch.setattr("rlbench.core.progress.time.monotonic", lambda: t[0])
    p = Progress(10**6, 10, mode="log", every_s=10.0)
    assert p._rate(0) is None  # the mark
    t[0] = 105.0
    assert p._rate(5000) == 1000.0  # half a span: the mark stays
    t[0] = 110.0
    assert p._rate(20000) == 2000.0  # a whole span: the mark moves to (110, 20000)
    t[0] = 111.0
    assert p._rate(21000) == 1000.0


def test_a_progress_line_never_counts_past_the_task_and_says_what_it_waits_for():
    from rlbench.core.progress import frames_text

    assert frames_text(1200, 4000, 0, 7) == "frames 1200/4000 (30%)"
    said = frames_text(246272, 200000, 5, 7)
    assert said.startswith("frames 200000/200000 (100%; waiting for the learner's updates") and "46272 more" in said
    assert frames_text(4100, 4000, 7, 7) == "frames 4000/4000 (100%)"  # both halves done: the task, not beyond
