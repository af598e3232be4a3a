"""Steady-state rates (rlbench/core/steady.py, rlbench/train/steady.py) on synthetic tick series,
and tracking.steady_min_windows refused out of range through the command."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlbench.core import steady as st
from rlbench.train.steady import SteadyRates, steady_span
from tests.conftest import runs


def ticks(fps: list, ups: float | None = 10.0, gpu: list | None = None, cpu: list | None = None) -> list[dict]:
    """One tick a second; None in `fps`: no window/fps at that tick (the actors not stepping)."""
    out = []
    for i, f in enumerate(fps):
        m = {"task_elapsed_s": i + 1.0}
        m |= {"window/fps": f} if f is not None else {}
        m |= {"window/learner_updates_per_s": ups} if ups is not None else {}
        m |= {"power_gpu_w": gpu[i]} if gpu and gpu[i] is not None else {}
        m |= {"power_cpu_w": cpu[i]} if cpu and cpu[i] is not None else {}
        out.append(m)
    return out


def test_windows_run_from_the_previous_tick_the_first_from_the_start():
    w = st.windows_of([{"task_elapsed_s": 1.2, "window/fps": 5.0}, {"task_elapsed_s": 2.5, "power_gpu_w": 90.0}])
    assert [(x.start_s, x.end_s, x.fps) for x in w] == [(0.0, 1.2, 5.0), (1.2, 2.5, None)]
    assert w[1].power == (("power_gpu_w", 90.0),) and w[1].length_s == pytest.approx(1.3)


def test_the_warm_up_is_cut_the_window_it_ends_in_included():
    """Warm-up ends at 2.5 s: the windows 0-1, 1-2 (slow, cold) and 2-3 (it ends inside) are out."""
    values, nulls = st.steady_rates(st.windows_of(ticks([10, 20, 30, 100, 110, 90, 100])), 2.5, 99.0, 3, {})
    assert values[st.WINDOWS] == 4 and values[st.SECONDS] == pytest.approx(4.0)
    assert (values[st.FPS], values[st.FPS_MIN], values[st.FPS_MAX]) == (100, 90, 110)
    assert values[st.UPDATES] == 10.0 and st.FPS not in nulls


def test_the_tail_is_cut_and_windows_without_stepping_are_not_counted():
    """The first role done at 5.5 s: the window 5-6 it ends in and the learner's tail (no window/fps) are out."""
    values, _ = st.steady_rates(st.windows_of(ticks([50, 60, 70, 80, 90, 5, None, None])), 1.0, 5.5, 3, {})
    assert values[st.WINDOWS] == 4 and (values[st.FPS], values[st.FPS_MIN], values[st.FPS_MAX]) == (75, 60, 90)


def test_actors_in_bursts_have_the_rate_of_their_span_and_the_range_of_its_blocks():
    """Actors held by the replay ratio step in bursts (most 1-s windows read 0, as at 128 and 256
    actors on the 2-core VM): the rate is the frames over the span, never the 0 of a median
    window; the range is over 5 blocks of 4 windows, each holding one burst of 2 x 8,000 frames
    but the last, which holds two."""
    fps = [0, 0, 8000, 8000] * 4 + [8000, 8000, 8000, 8000]
    values, _ = st.steady_rates(st.windows_of(ticks([1, *fps])), 1.0, 99.0, 3, {})
    assert values[st.WINDOWS] == 20 and values[st.FPS] == pytest.approx(4800)
    assert (values[st.FPS_MIN], values[st.FPS_MAX]) == (4000, 8000)


def test_too_few_windows_give_the_count_and_why_never_a_rate():
    values, nulls = st.steady_rates(st.windows_of(ticks([50, 60, 70, 80])), 1.5, 4.0, 3, {})
    assert values == {st.WINDOWS: 2, st.SECONDS: 2.0}
    assert nulls[st.FPS] == (
        "2 steady windows, 3 needed (tracking.steady_min_windows): warm-up until 1.5 s, the first role done at 4.0 s"
    )
    assert set(nulls) == {*st.RATES, *st.POWERS, st.FRAMES_PER_J}
    values, nulls = st.steady_rates(st.windows_of(ticks([50, 60, 70, 80])), None, 4.0, 3, {"warm": "no update"})
    assert values == {st.WINDOWS: 0, st.SECONDS: 0.0} and nulls[st.FPS] == "no update"


def test_power_is_the_median_and_frames_per_joule_the_frames_over_the_joules():
    values, nulls = st.steady_rates(
        st.windows_of(ticks([100, 200, 300], gpu=[100, 300, 200], cpu=[50, 50, None])), 0.0, 3.0, 3, {}
    )
    assert values[st.POWER_GPU] == 200 and values[st.POWER_CPU] == 50 and not nulls
    assert values[st.FRAMES_PER_J] == pytest.approx((100 + 200) / (150 + 350))  # the third: no CPU power at its tick


def test_unmeasured_power_is_null_with_the_reason_never_zero():
    values, nulls = st.steady_rates(
        st.windows_of(ticks([100, 200, 300], ups=None, gpu=[100, 300, 200])), 0.0, 3.0, 3, {st.POWER_CPU: "no RAPL"}
    )
    assert values[st.POWER_GPU] == 200 and values[st.FRAMES_PER_J] == pytest.approx(600 / 600)
    assert nulls == {st.POWER_CPU: "no RAPL", st.UPDATES: nulls[st.UPDATES]} and "no learner" in nulls[st.UPDATES]
    _, nulls = st.steady_rates(
        st.windows_of(ticks([100, 200, 300])), 0.0, 3.0, 3, {st.POWER_GPU: "no NVML", st.POWER_CPU: "no RAPL"}
    )
    assert nulls[st.FRAMES_PER_J] == "no NVML; no RAPL"


def trainer(first_step, first_update, actors_done, learner_done, learner=True, updates=10):
    actors = SimpleNamespace(first_step_at=first_step, stepping_until=actors_done)
    loop = (
        SimpleNamespace(first_update_at=first_update, finished_at=learner_done, update_target=updates)
        if learner
        else None
    )
    return SimpleNamespace(started=100.0, actors=actors, learner=loop)


def test_the_warm_up_ends_with_the_later_of_first_step_and_first_update_the_steady_state_with_the_first_role():
    assert steady_span(trainer(101.0, 103.0, 110.0, 112.0), 12.5) == (3.0, 10.0, "")
    assert steady_span(trainer(104.0, 103.0, 110.0, 108.0), 12.5) == (4.0, 8.0, "")  # the learner done first
    assert steady_span(trainer(101.0, None, 110.0, None, learner=False), 10.5) == (1.0, 10.0, "")  # algo=random
    assert steady_span(trainer(101.0, None, 110.0, 100.1, updates=0), 10.5) == (1.0, 10.0, "")  # learner_updates=0
    warm, until, why = steady_span(trainer(101.0, None, 110.0, 110.5), 10.5)
    assert warm is None and until == 10.0 and why == "no steady state: the learner made no update"


def test_the_observer_logs_the_rates_and_tags_each_unmeasured_value():
    obs = SteadyRates(min_windows=3, telemetry=None)
    for m in ticks([10, 100, 100, 120, 80, 7, None]):
        obs.tick(m, int(m["task_elapsed_s"]))
    values, tags = obs.final_values({"runtime_s": 7.2}, trainer(100.5, 101.0, 105.5, 107.0))
    assert values[st.FPS] == 100 and values[st.WINDOWS] == 4
    assert tags["null/steady/power_gpu_w"] == "telemetry.enabled=false (no power sampled)"
    obs = SteadyRates(min_windows=5, telemetry=None)
    for m in ticks([10, 100, 100, 120, 80, 7, None]):
        obs.tick(m, int(m["task_elapsed_s"]))
    values, tags = obs.final_values({"runtime_s": 7.2}, trainer(100.5, 101.0, 105.5, 107.0))
    assert values == {st.WINDOWS: 4, st.SECONDS: 4.0} and tags["null/steady/fps"].startswith(
        "4 steady windows, 5 needed"
    )


@pytest.mark.parametrize("value", ["0", "-2"])
def test_steady_min_windows_out_of_range_is_refused_before_any_run(rlbench_main, store, value):
    out = rlbench_main([f"tracking.steady_min_windows={value}", "env=cartpole", *store["overrides"]])
    lines = [ln for ln in out.stderr.splitlines() if "tracking.steady_min_windows" in ln]
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-2000:]
    assert f"tracking.steady_min_windows={value}: allowed: an integer >= 1" in lines[0]
    assert not store["db"].exists() or runs(store["uri"]) == []


def test_a_window_of_no_length_is_not_counted():
    """Two ticks at one time leave a window of 0 s: it has no rate, so it is left out."""
    series = ticks([100, 110, 90]) + [{"task_elapsed_s": 3.0, "window/fps": 5000.0}]
    values, _ = st.steady_rates(st.windows_of(series), 0.0, 99.0, 3, {})
    assert values[st.WINDOWS] == 3 and values[st.FPS] == pytest.approx(100)
