"""repeats=N: the grid's expansion and its refusals, the median and spread per configuration,
and a verdict that never separates configurations by less than the measured spread."""

import json
import re
import statistics
from types import SimpleNamespace

import mlflow
import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from omegaconf import OmegaConf

from rlbench.cli.command import exits
from rlbench.core.repeats import Spread, config_rows, repeated, spread
from rlbench.core.verdict import (
    REPEATS,
    UNKNOWN_FLOOR,
    UNKNOWN_WINDOWS,
    WINDOWS,
    difference,
    judge,
    knee,
    noise_floor,
    recommend,
    rows_result,
)
from rlbench.prepare.grid import SEED_STRIDE, ConfigError, grid_of, repeat_jobs, repeat_seeds, seed_overlap
from rlbench.report.findings import findings
from rlbench.report.html import config_table
from rlbench.tracking.parent_note import answer_lines, best_row, summary_metrics, sweep_note, verdicts
from rlbench.tracking.study_records import JobRun, Study
from tests.conftest import CARTPOLE_TINY, main_in_process, plain_table, rlbench_cli, runs


def _sweeper(config: dict | None = None, params: dict | None = None):
    """What grid_of() reads of the Hydra sweeper: the preset's params, the composed config, Hydra's grid."""
    return SimpleNamespace(
        _parse_config=lambda: [f"{k}={v}" for k, v in (params or {}).items()],
        hydra_context=SimpleNamespace(config_loader=None),
        config=OmegaConf.create({"seed": 1, "repeats": 1, "search": None} | (config or {})),
        split_arguments=BasicSweeper.split_arguments,
    )


# --- expansion ---


def test_repeats_run_every_configuration_with_its_own_seed_interleaved():
    grid = grid_of(_sweeper(), ["actors=4,40", "repeats=3"])
    assert grid.repeats == 3 and grid.jobs == [
        ["actors=4", "seed=1"],
        ["actors=40", "seed=1"],
        ["actors=4", f"seed={1 + SEED_STRIDE}"],
        ["actors=40", f"seed={1 + SEED_STRIDE}"],
        ["actors=4", f"seed={1 + 2 * SEED_STRIDE}"],
        ["actors=40", f"seed={1 + 2 * SEED_STRIDE}"],
    ]
    assert grid.configs == ["actors=4", "actors=40"] * 3 and grid.repeat == [0, 0, 1, 1, 2, 2]


def test_repeats_start_from_the_given_seed_or_the_configs():
    assert [j[-1] for j in grid_of(_sweeper(), ["repeats=2", "seed=7"]).jobs] == ["seed=7", f"seed={7 + SEED_STRIDE}"]
    assert [j[-1] for j in grid_of(_sweeper({"seed": 5, "repeats": 2}), []).jobs] == [
        "seed=5",
        f"seed={5 + SEED_STRIDE}",
    ]


def test_a_seed_list_of_repeats_values_gives_the_repeats_seeds():
    grid = grid_of(_sweeper(), ["actors=4,40", "repeats=3", "seed=1,2,3"])
    assert [j for j in grid.jobs if j[0] == "actors=4"] == [
        ["actors=4", "seed=1"],
        ["actors=4", "seed=2"],
        ["actors=4", "seed=3"],
    ]
    assert len(grid.jobs) == 6  # not a grid axis: 2 configurations x 3 repeats, not x 3 x 3


def test_repeats_one_leaves_the_grid_as_it_was():
    grid = grid_of(_sweeper(), ["actors=4,40", "seed=1,2"])  # a seed grid: every seed its own configuration
    assert (
        grid.jobs == [["actors=4", "seed=1"], ["actors=4", "seed=2"], ["actors=40", "seed=1"], ["actors=40", "seed=2"]]
        and grid.repeats == 1
        and grid.repeat == [0] * 4
    )


def test_a_preset_sweep_is_repeated_too():
    grid = grid_of(_sweeper(params={"actors": "4,8"}), ["repeats=2"])
    assert [j[0] for j in grid.jobs] == ["actors=4", "actors=8", "actors=4", "actors=8"]


@pytest.mark.parametrize(
    "args, config, message",
    [
        (["actors=4,40", "repeats=3", "seed=1,2"], {}, "seed: 2 values (1,2) but repeats=3: give 3 seeds or one"),
        (["repeats=0"], {}, "repeats=0: allowed: an integer >= 1"),
        (["repeats=1,3"], {}, "repeats=1,3: allowed: one integer >= 1 per sweep, not a list"),
        (["repeats=2", "seed=4,4"], {}, "seed: the repeats' seeds (4,4) must differ"),
        (["repeats=2"], {"search": {"study": "ratio"}}, "repeats=2: allowed with search=...: 1 only"),
    ],
)
def test_bad_repeats_are_refused_before_any_job_with_the_key(args, config, message, capsys):
    with pytest.raises(SystemExit) as exit_, exits("rlbench"):  # as the sweeper runs it
        grid_of(_sweeper(config), args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rlbench: no job started: ") and message in err


def test_repeat_seeds_and_jobs_as_plain_functions():
    assert repeat_seeds(3, 1) == ["1", "10001", "20001"]
    assert repeat_seeds(2, 0, ["3", "9"]) == ["3", "9"]
    with pytest.raises(ConfigError, match="repeats=0"):
        repeat_seeds(0, 1)
    assert repeat_jobs([["a=1"]], ["5"]).jobs == [["a=1"]]  # one seed: no seed override added


def test_seed_overlap_warns_when_the_repeats_envs_share_seeds():
    conf = [SimpleNamespace(seed=s, actors=40, eval_envs=2) for s in (1, 2, 3)]
    grid = repeat_jobs([["actors=40"]], ["1", "2", "3"])
    assert "1 apart, fewer than a job's 42 envs" in seed_overlap(grid, conf)
    far = [SimpleNamespace(seed=1 + k * SEED_STRIDE, actors=256, eval_envs=2) for k in range(3)]
    assert seed_overlap(grid, far) is None


# --- statistics ---


def test_spread_median_range_and_count():
    s = spread([75.3, 70.1, 72.8, None, float("nan")])
    assert s == Spread(72.8, 70.1, 75.3, 3) and s.width == pytest.approx(5.2)
    assert s.text() == "72.8 (70.1..75.3, n=3)"
    assert spread([4.0, 1.0]).median == 2.5 and spread([3.0]).width is None and spread([3.0]).text() == "3"
    assert spread([None]) is None


def test_the_noise_floor_is_the_largest_ratio_between_two_repeats():
    a, b = spread([70.0, 72.0, 74.0]), spread([71.0, 73.3, 71.5])
    assert noise_floor([a, b]) == pytest.approx(74.0 / 70.0 - 1) and noise_floor([spread([1.0])]) is None
    assert difference(72.0, 71.5) == difference(71.5, 72.0) == pytest.approx(72.0 / 71.5 - 1)
    v = judge({"a": [70.0, 72.0, 74.0], "b": [71.0, 73.3, 71.5]})
    assert (v.best, v.tied, v.floor_text()) == ("b", ("a",), "noise floor 5.7%")
    assert v.comparisons[0].text == "b is 0.7% faster than a; noise floor 5.7%: not told apart"
    assert judge({"a": [70.0, 72.0, 74.0], "b": [80.0]}).comparisons[0].told_apart is True  # 11.1% > 5.7%
    assert judge({"a": [70.0, 72.0, 74.0], "b": [71.0, 73.3]}, floor_min=0.2).floor == 0.2  # at least the minimum
    assert judge({"a": [10.0], "b": [12.0]}, "fps").best == "b"  # a rate: the higher is better


def test_the_steady_windows_give_the_floor_only_without_repeats_and_only_for_a_steady_rate():
    windows = {"a": [(800.0, 1100.0)], "b": [(1200.0, 1500.0)]}  # widest: 1100 / 800 - 1 = 37.5%
    v = judge({"a": [1000.0], "b": [1400.0]}, "steady/fps", 0.0, windows)
    assert (v.floor, v.source, v.measured_floor) == (pytest.approx(0.375), WINDOWS, None)
    assert v.answer() == (
        "Best by median steady/fps: b; told apart from all others: at least 40.0% "
        "faster than a (noise floor 37.5% from the steady windows)"
    )
    assert v.label("a") == "slower than best: 40.0% slower; noise floor 37.5% from the steady windows"
    assert judge({"a": [1000.0], "b": [1400.0]}, "steady/fps", 0.5, windows).floor == 0.5  # the minimum still holds
    # repeats first: two runs of `a` give the floor, however wide the windows
    rep = judge({"a": [1000.0, 1050.0], "b": [1400.0]}, "steady/fps", 0.0, windows | {"a": [(800.0, 1100.0)] * 2})
    assert (rep.floor, rep.source, rep.windows_floor) == (pytest.approx(0.05), REPEATS, pytest.approx(0.375))
    assert rep.floor_text() == "noise floor 5.0%"
    # a window at 0 frames/s bounds no ratio, and a whole-task metric ignores the windows
    zero = judge({"a": [1000.0], "b": [1400.0]}, "steady/fps", 0.0, windows | {"a": [(0.0, 1100.0)]})
    assert zero.floor is None and zero.floor_text() == UNKNOWN_WINDOWS
    assert judge({"a": [10.0], "b": [12.0]}, "runtime_s", 0.0, {"a": [(1.0, 2.0)], "b": [(1.0, 2.0)]}).floor is None


def test_single_runs_leave_the_floor_unknown_whatever_the_minimum():
    v = judge({"a": [10.0], "b": [12.0]}, floor_min=0.5)
    assert v.floor is None and v.tied == () and v.comparisons[0].told_apart is None
    assert v.answer() == f"Best by median runtime_s: a; {UNKNOWN_FLOOR}" and "repeats=3" in UNKNOWN_FLOOR
    assert judge({"a": [None, float("nan"), 0.0]}).best is None  # nothing positive to compare
    with pytest.raises(ValueError, match="allowed: runtime_s, task_fps, fps"):
        judge({"a": [1.0]}, "energy_per_task_j")


ROWS = [  # 2 configurations x 3 repeats, interleaved as the sweep runs them; one run failed
    {
        "job": 0,
        "name": "actors=4 seed=1",
        "config": "actors=4",
        "status": "FINISHED",
        "runtime_s": 130.4,
        "fps": 1581.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "a" * 32,
    },
    {
        "job": 1,
        "name": "actors=40 seed=1",
        "config": "actors=40",
        "status": "FINISHED",
        "runtime_s": 72.8,
        "fps": 3393.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "b" * 32,
    },
    {
        "job": 2,
        "name": "actors=4 seed=10001",
        "config": "actors=4",
        "status": "FINISHED",
        "runtime_s": 128.0,
        "fps": 1600.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "c" * 32,
    },
    {
        "job": 3,
        "name": "actors=40 seed=10001",
        "config": "actors=40",
        "status": "FINISHED",
        "runtime_s": 75.3,
        "fps": 3300.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "d" * 32,
    },
    {
        "job": 4,
        "name": "actors=4 seed=20001",
        "config": "actors=4",
        "status": "FAILED",
        "runtime_s": None,
        "fps": None,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": None,
        "run_id": "e" * 32,
    },
    {
        "job": 5,
        "name": "actors=40 seed=20001",
        "config": "actors=40",
        "status": "FINISHED",
        "runtime_s": 70.1,
        "fps": 3400.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "f" * 32,
    },
]


def test_sweep_rows_become_one_row_per_configuration():
    four, forty = config_rows(ROWS)
    assert (four["config"], four["runs"], four["finished"], four["jobs"]) == ("actors=4", 3, 2, [0, 2, 4])
    assert four["status"] == "2 FINISHED, 1 FAILED" and four["runtime_s"] == Spread(129.2, 128.0, 130.4, 2)
    assert forty["runtime_s"].text() == "72.8 (70.1..75.3, n=3)" and forty["energy_per_task_j"] is None
    assert repeated(ROWS) and not repeated([dict(r, config=r["name"]) for r in ROWS])


def test_the_parent_picks_the_best_configuration_by_its_median():
    best = best_row(ROWS, rows_result(ROWS))
    assert best["name"] == "actors=40" and best["runtime_s"] == 72.8 and best["jobs"] == [1, 3, 5]
    m = summary_metrics(ROWS, rows_result(ROWS))
    assert m["best/runtime_s"] == 72.8 and m["best/fps"] == 3393.0 and m["jobs_failed"] == 1
    note = plain_table(sweep_note("sweep actors=4,40 repeats=3", ROWS, "FAILED", "1", "p" * 32, rows_result(ROWS), "c"))
    assert "Best (median runtime_s): `actors=40` (3 of 3 runs finished): runtime_s 72.8 (70.1..75.3, n=3)" in note
    assert "| `actors=40` [1](#/experiments/1/runs/" in note and "| 72.8 (70.1..75.3, n=3) |" in note  # the table
    # 129.2 s vs 72.8 s: 77.5% apart; the floor is actors=40's 75.3 / 70.1 - 1
    assert "- actors=40 is 77.5% faster than actors=4; noise floor 7.4%: told apart" in note
    assert (
        "Verdict: Best by median runtime_s: actors=40; told apart from all others: at least "
        "77.5% faster than actors=4 (noise floor 7.4%)"
    ) in note


TIED = [
    dict(r, runtime_s=r["runtime_s"] and r["runtime_s"] - 55.0) if r["config"] == "actors=4" else r for r in ROWS
]  # actors=4 now 74.2 s (73.0..75.4): 1.9% slower than actors=40, within its 7.4%


def test_the_parent_says_when_the_best_cannot_be_told_apart():
    best = best_row(TIED, rows_result(TIED))
    assert best["name"] == "actors=40" and best["verdict"].tied == ("actors=4",)
    assert "- actors=40 is 1.9% faster than actors=4; noise floor 7.4%: not told apart" in sweep_note(
        "s", TIED, "FINISHED", "1", "p" * 32, rows_result(TIED), "c"
    )
    answer = answer_lines(TIED, rows_result(TIED))  # the terminal's last lines before the next command: plain text
    assert answer[0].startswith("Best (median runtime_s): actors=40 (3 of 3 runs finished): runtime_s 72.8")
    assert answer[1:] == [
        ("Verdict: Best by median runtime_s: actors=40; not told apart from actors=4 (1.9% slower): noise floor 7.4%"),
        "- actors=40 is 1.9% faster than actors=4; noise floor 7.4%: not told apart",
    ]


def test_single_runs_say_the_spread_is_unknown():
    rows = [dict(r, config=r["name"]) for r in ROWS[:2]]
    assert best_row(rows, rows_result(rows))["job"] == 1 and best_row(rows, rows_result(rows))["verdict"].tied == ()
    assert f"Verdict: Best by median runtime_s: actors=40 seed=1; {UNKNOWN_FLOOR}" in sweep_note(
        "s", rows, "FINISHED", "1", "p" * 32, rows_result(rows), "c"
    )


def test_each_finished_job_is_tagged_with_its_configurations_verdict():
    """The tag `verdict` the runs table shows (rlbench/sweeps/sweep.py mark_verdicts): each
    finished job of the best configuration `best`, the others beyond the noise floor `slower`;
    a failed job (e) none."""
    slower, best = "slower than best: 77.5% slower; noise floor 7.4%", "best; noise floor 7.4%"
    tags = verdicts(ROWS, rows_result(ROWS))
    assert tags == {"a" * 32: slower, "b" * 32: best, "c" * 32: slower, "d" * 32: best, "f" * 32: best}
    assert (
        verdicts(TIED, rows_result(TIED))["a" * 32]
        == verdicts(TIED, rows_result(TIED))["c" * 32]
        == "not told apart from best: 1.9% slower; noise floor 7.4%"
    )
    assert verdicts(TIED, rows_result(TIED))["b" * 32] == best


def test_single_runs_verdicts_say_the_spread_is_unknown():
    single = [dict(r, config=r["name"]) for r in ROWS[:2]]
    assert verdicts(single, rows_result(single)) == {
        "a" * 32: "79.1% slower than best; noise floor unknown",
        "b" * 32: "best; noise floor unknown",
    }
    one = single[1:]
    assert verdicts(one, rows_result(one)) == {"b" * 32: "best"}  # one configuration: best, with nothing to compare
    gone = [ROWS[4], dict(ROWS[1], run_id=None)]
    assert verdicts(gone, rows_result(gone)) == {}  # failed, or no run to tag


# --- the verdict ---


def test_the_knee_is_not_placed_by_a_difference_within_the_noise_floor():
    # 4 -> 40 shortens the task 44%, measurably; 40 -> 256 by 12.5%, above the 10% threshold but
    # a difference of 14.3% within a floor of 15%: the knee stays at 40 and says why.
    k = knee({4: 130.0, 40: 80.0, 256: 70.0}, 0.10, None, 0.15)
    assert (k.actors, k.reached, k.spread) == (40, True, 0.15)
    assert "no larger actor count shortens the task measurably (12.5% shorter, within the noise floor)" in k.text
    assert "(not told apart: 14.3% difference, noise floor 15.0%)" in k.text and "unknown" not in k.text
    # the same medians with a floor of 10%: 256 is measurably faster, no knee in the range
    assert not knee({4: 130.0, 40: 80.0, 256: 70.0}, 0.10, None, 0.10).reached


def test_a_slower_larger_count_within_the_floor_is_said_to_be_indistinguishable():
    k = knee({40: 72.8, 256: 74.0}, 0.10, {40: 3393.0, 256: 3401.0}, 0.074)
    assert k.actors == 40 and k.text.endswith(
        "at 256 actors: actors' fps +0.2%, task +1.6% (not told apart: 1.6% difference, noise floor 7.4%)"
    )


def test_the_knee_with_single_runs_says_the_spread_is_unknown():
    k = knee({4: 73.8, 40: 72.8}, 0.10)
    assert k.actors == 4 and k.spread is None and k.text.endswith(UNKNOWN_FLOOR)


def _candidate(name, runs):
    s = spread(runs)
    return {
        "name": name,
        "ratio": 0.5,
        "runtime_s": s.median,
        "fps": 1000.0,
        "energy_j": None,
        "runtime_spread": s.width,
        "runs": s.n,
        "runtime_runs": runs,
    }


def test_the_recommendation_names_what_it_cannot_tell_apart():
    rec = recommend(
        [
            _candidate("actors=4", [70.6, 71.8, 72.9]),
            _candidate("actors=40", [72.2, 72.8, 73.3]),
            _candidate("actors=256", [85.4, 86.1, 86.9]),
        ]
    )  # floor: 72.9 / 70.6 - 1 = 3.3%
    assert rec.name == "actors=4" and rec.tied == ["actors=40"] and rec.runs == 3
    assert rec.noise_floor == pytest.approx(72.9 / 70.6 - 1)
    assert "task in 71.8 s (median of 3 runs; noise floor 3.3%)" in rec.text
    assert rec.text.endswith("; actors=4 is 1.4% faster than actors=40; noise floor 3.3%: not told apart")


def test_the_recommendation_on_single_runs_says_the_spread_is_unknown():
    rec = recommend([_candidate("actors=4", [71.8]), _candidate("actors=40", [72.8])])
    assert rec.name == "actors=4" and rec.tied == [] and "median of" not in rec.text
    assert rec.text.endswith(f"; {UNKNOWN_FLOOR}")


# --- the report on repeated runs ---


def _run(i: int, actors: int, runtime: float, fps: float) -> JobRun:
    return JobRun(
        f"id{i}",
        f"actors={actors} seed={1 + (i // 2) * SEED_STRIDE}",
        "FINISHED",
        {"actors": str(actors)},
        {"runtime_s": runtime, "fps": fps, "cpu_gpu_ratio": 0.5},
        {},
        {"repeat_group": f"actors={actors}", "repeat": str(i // 2), "repeats": "3"},
    )


def test_findings_and_the_html_use_the_median_per_configuration_and_show_the_spread():
    # actors=4: 74.0, 71.8, 73.0 s; actors=40: 72.8, 70.1, 75.3 s: medians 73.0 vs 72.8, ranges 2.2 and 5.2 s
    times = {4: [74.0, 71.8, 73.0], 40: [72.8, 70.1, 75.3]}
    jobs = [_run(2 * k + (a == 40), a, times[a][k], 1000.0 + a) for k in range(3) for a in (4, 40)]
    study = Study("sweep", "sweep actors=4,40 repeats=3", "p", {"hardware_threads": "2"}, jobs, [])
    f = findings(study)
    assert f["configurations"]["actors=40"]["runtime_s"] == {
        "median": 72.8,
        "low": 70.1,
        "high": 75.3,
        "n": 3,
        "spread": pytest.approx(5.2),
    }
    rec = f["recommendation"]
    assert rec["name"] == "actors=40" and rec["runs"] == 3 and rec["tied"] == ["actors=4"]
    assert "actors=40 is 0.3% faster than actors=4; noise floor 7.4%: not told apart" in rec["text"]
    assert f["verdict"]["best_set"] == ["actors=40", "actors=4"] and f["verdict"]["floor_text"] == "noise floor 7.4%"
    (k,) = f["knee"].values()
    assert k["actors"] == 4 and k["runs"][40]["n"] == 3 and "not told apart" in k["text"]
    page = config_table(f["configurations"])
    assert "<td>actors=40</td><td>72.8 (70.1..75.3, n=3)</td>" in page and "<h2>Configurations</h2>" in page
    assert config_table({"a": {"runtime_s": {"median": 1.0, "low": 1.0, "high": 1.0, "n": 1}}}) == ""


# --- the command line: refusals before any run, and a real sweep with repeats ---


@pytest.mark.e2e
@pytest.mark.parametrize(
    "args, message",
    [
        (["-m", "actors=2,4", "repeats=3", "seed=1,2"], "seed: 2 values (1,2) but repeats=3: give 3 seeds or one"),
        (["repeats=3"], "repeats=3 runs every configuration 3 times as one sweep: add -m"),
    ],
)
def test_the_command_refuses_bad_repeats_before_any_run(store, args, message):
    out = rlbench_cli(args + CARTPOLE_TINY + store["overrides"], timeout=60)
    assert out.returncode == 2 and message in out.stderr, out.stderr[-2000:]
    assert not store["db"].exists() or runs(store["uri"]) == []


@pytest.mark.e2e
def test_a_sweep_with_repeats_records_each_run_and_summarises_each_configuration(store):
    out = main_in_process(
        ["-m", "actors=2,4", "repeats=2", *CARTPOLE_TINY, "progress=log", "telemetry.rate_hz=2", *store["overrides"]]
    )
    assert out.returncode == 0, out.stderr[-3000:]
    all_runs = runs(store["uri"])
    (parent,) = [r for r in all_runs if r.data.tags.get("rlbench.role") == "sweep"]
    kids = sorted(
        (r for r in all_runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id),
        key=lambda r: r.info.run_name,
    )
    assert parent.info.run_name == "sweep actors=2,4 repeats=2" and parent.data.params["repeats"] == "2"
    assert [k.info.run_name for k in kids] == [
        "actors=2 seed=1",
        "actors=2 seed=10001",
        "actors=4 seed=1",
        "actors=4 seed=10001",
    ]
    assert [(k.data.tags["repeat_group"], k.data.tags["repeat"], k.data.tags["repeats"]) for k in kids] == [
        ("actors=2", "0", "2"),
        ("actors=2", "1", "2"),
        ("actors=4", "0", "2"),
        ("actors=4", "1", "2"),
    ]
    assert all("repeats" not in k.data.params and k.info.status == "FINISHED" for k in kids)
    assert len({k.data.tags["config_hash"] for k in kids}) == 4  # each repeat is its own work (its seed)
    assert "[rlbench sweep] per configuration, median (min..max, n) of its finished runs:" in out.stdout
    assert re.search(r"actors=2\s+2 FINISHED\s+[\d.]+ \([\d.]+\.\.[\d.]+, n=2\)", out.stdout), out.stdout[-2000:]
    arts = [a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id)]
    assert "summary_configs.csv" in arts and "summary.csv" in arts
    medians = {
        g: statistics.median(k.data.metrics["runtime_s"] for k in kids if k.data.tags["repeat_group"] == g)
        for g in ("actors=2", "actors=4")
    }
    assert parent.data.metrics["best/runtime_s"] == pytest.approx(min(medians.values()), rel=1e-5)
    view = (
        mlflow.MlflowClient()
        .get_experiment(parent.info.experiment_id)
        .tags[f"mlflow.sharedViewState.rlbench-{parent.info.run_id}"]
    )  # the address the sweep prints
    state = json.loads(view)
    assert state["groupBy"] == {
        "aggregateFunction": "average",
        "groupByKeys": [{"mode": "tag", "groupByData": "repeat_group"}],
    }
    assert "params.`actors`" in state["selectedColumns"] and "params.`seed`" not in state["selectedColumns"]
    assert next(c for c in state["selectedColumns"] if c.startswith("tags.")) == "tags.`verdict`"
    # each run tagged with its configuration's verdict: the one rule over the runs' logged values
    v = judge({g: [k.data.metrics["runtime_s"] for k in kids if k.data.tags["repeat_group"] == g] for g in medians})
    assert [k.data.tags["verdict"] for k in kids] == [v.label(k.data.tags["repeat_group"]) for k in kids]
    assert v.label(v.best).startswith("best; noise floor ")
