"""pipelines/gpu_study.py --stage: each stage's configurations, frames sized to steady windows and
updates, the warm-up, the budget that refuses instead of cutting, the summary with its noise
floor, the ratio in two units and the idle power (fast, with fakes); one stage end to end (e2e)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mlflow
import pytest

from rlbench.core.repeats import Spread
from rlbench.predict.datasheet import Gpu, equivalent_sms, ratio_two_units
from rlbench.predict.stage_plan import (
    Point,
    Sized,
    StageOverheads,
    check_budget,
    grid_groups,
    grid_overrides,
    job_start_s,
    parts_from_json,
    parts_to_json,
    plan_stage,
    reused_start_s,
    size_frames,
    split_parts,
    stage_points,
)
from rlbench.predict.stage_planner import accepted_frames
from rlbench.predict.study_plan import PlanError
from rlbench.report.stage_summary import NOT_LOGGED, compare, stage_markdown, stage_summary
from rlbench.telemetry.idle import idle_power
from rlbench.telemetry.nvml import GpuSample
from rlbench.tracking.study_records import JobRun, Study, is_job
from tests.conftest import ROOT
from tests.test_gpu_study import fake_h100, gs, refused  # noqa: F401 - fixtures and the refusal check

V100, H200 = Gpu("Tesla V100", 80, 7), Gpu("NVIDIA H200", 132, 9)


# --- the stages' configurations -------------------------------------------------------------


def names(points):
    return [(p.name, p.repeats) for p in points]


def test_the_actors_stage_runs_4_40_128_256_twice_each():
    points, left = stage_points("actors", [4, 40, 128, 256], 132, 9, 16)
    assert [(p.actors, p.repeats) for p in points] == [(4, 2), (40, 2), (128, 2), (256, 2)] and left == []


def test_the_sms_stage_runs_all_half_and_16_three_times_and_8_once():
    points, _ = stage_points("sms", [128], 132, 9, 16)
    assert [(p.sm_limit, p.repeats) for p in points] == [(None, 3), (64, 3), (16, 3), (8, 1)]
    assert {p.actors for p in points} == {128}
    pcie, _ = stage_points("sms", [40], 114, 9, 16)  # half of 114 is 57: a green context grants 56
    assert [p.sm_limit for p in pcie] == [None, 56, 16, 8]


def test_the_cpu_stage_runs_null_and_4_8_16_threads_at_every_sm_and_the_same_ratio_pairs():
    points, left = stage_points("cpu", [128], 132, 9, 16)
    assert [(p.sm_limit, p.actor_threads) for p in points] == [
        (None, None),
        (None, 4),
        (None, 8),
        (None, 16),
        (8, 8),
        (16, 16),
    ]
    assert {p.repeats for p in points} == {2} and left == []
    small, left = stage_points("cpu", [4], 2, None, 2)  # 2 threads: no 4, 8 or 16
    assert [p.actor_threads for p in small] == [None]
    assert "actor_threads=4: more than the 2 hardware threads here" in left and len(left) == 5


def test_the_points_become_grids_the_pairs_through_an_interpolation():
    points, _ = stage_points("cpu", [128], 132, 9, 16)
    groups = grid_groups(points)
    assert [grid_overrides(ps, pair) for ps, pair in groups] == [
        [["actors=128", "sm_limit=null", "actor_threads=null,4,8,16"]],
        [["actors=128", "actor_threads=8,16", "sm_limit=${actor_threads}"]],
    ]
    actors, _ = stage_points("actors", [4, 40], 132, 9, 16)
    assert len(grid_groups(actors)) == 2  # one per actor count: each its own frames
    mixed = [Point(4, None, 2), Point(4, 8, None)]  # not a product of its knobs: one grid each
    assert grid_overrides(mixed, False) == [p.overrides() for p in mixed]


# --- frames, the warm-up, the budget ----------------------------------------------------------


def linear(fps: float, per_update: int, ramp_s: float = 3.0):
    """A job whose task is frames / fps, steady after ramp_s, one update per `per_update` frames."""
    return lambda point, frames: Sized(frames / fps, max(0.0, frames / fps - ramp_s), frames // per_update, "x", 8, 132)


def test_frames_are_the_fewest_that_hold_20_s_steady_and_20_updates():
    updates_bind = linear(fps=100_000, per_update=25_000)  # 20 updates: 500k frames (1 s steady: 400k)
    assert size_frames(lambda f: updates_bind(Point(4), f), min_steady_s=1.0) == 500_000
    steady_binds = linear(fps=20_000, per_update=10_000, ramp_s=0.0)  # 20 s at 20k fps: 400k frames
    assert size_frames(lambda f: steady_binds(Point(4), f)) == 400_000
    with pytest.raises(PlanError, match="no task up to 50000000 frames"):
        size_frames(lambda f: Sized(1.0, 0.0, 0))


def stage_costs() -> StageOverheads:
    return StageOverheads(install_s=10, plan_s=10, process_s=10, idle_s=10, sweep_s=5, summary_s=10)


def test_the_plan_sizes_each_grid_and_warms_up_on_its_first_point():
    points, _ = stage_points("sms", [40], 132, 9, 16)
    plan = plan_stage("sms", points, linear(fps=40_000, per_update=25_000), overheads=stage_costs())
    assert plan.warmup.point == points[0] and plan.warmup.sized.updates == 2 and plan.warmup.frames == 50_000
    assert {j.frames for j in plan.jobs} == {920_000}  # 23 s at 40k fps: 20 s steady after a 3 s ramp
    assert plan.grids() == [
        ["actors=40", "sm_limit=null,64,16", "actor_threads=null", "workload.frames=920000", "repeats=3"],
        ["actors=40", "sm_limit=8", "actor_threads=null", "workload.frames=920000", "repeats=1"],
    ]
    start = 8 + 12 * 36 / 124 + 2  # the H200's 8 s at 4 and 20 s at 128 actors, at 40; + 2 s for the end
    run, warm = start + 23.0, start + 50_000 / 40_000
    assert plan.total_s() == pytest.approx(10 + 10 + 10 + 10 + 3 * 5 + warm + 10 * run + 10)


def test_a_warm_up_the_config_refuses_takes_the_fewest_frames_it_accepts():
    """The CPU analogue's sms stage planned its warm-up at 256 actors for 60,000 frames (2
    updates predicted) and its run refused it: each actor must fill one sequence (82,944)."""
    points, _ = stage_points("sms", [256], 2, None, 2)
    least = accepted_frames(["env=pong", "experiment=sm_sweep_cpu"])
    assert least(points[0], 60_000) == 90_000 and least(points[0], 550_000) == 550_000
    plan = plan_stage("sms", points, linear(fps=40_000, per_update=25_000), least_frames=least)
    assert plan.warmup.frames == 90_000 and plan.warmup.sized.updates == 3


def test_a_stay_that_cannot_hold_the_longest_job_once_is_refused_and_nothing_is_cut():
    points, _ = stage_points("actors", [4, 40], 132, 9, 16)
    plan = plan_stage("actors", points, linear(fps=10_000, per_update=25_000), overheads=stage_costs())
    one = (
        5 * 10 + 2 * 5 + plan.warmup.seconds() + plan.jobs[1].seconds()
    )  # the fixed costs, the warm-up, 40 actors once
    check_budget(plan, one)  # holds the longest job once: no error (the rest runs in parts)
    with pytest.raises(PlanError) as e:
        check_budget(plan, one - 1)
    assert "the actors stage's longest job, actors=40 sm_limit=all actor_threads=null" in str(e.value)
    assert f"no job is cut for its length; allowed: --budget-s >= {int(-(-one // 1))}" in str(e.value)
    with pytest.raises(PlanError, match="too small for one warm-up and one job of the actors stage"):
        check_budget(plan, plan.smallest_s() - 1)


def test_a_job_s_start_follows_the_h200_s_measured_figures():
    assert [job_start_s(a) for a in (1, 4, 128, 256)] == [10.0, 10.0, 22.0, 31.0]  # 8, 20, 29 s + 2 s for the end
    assert job_start_s(40) == pytest.approx(8 + 12 * 36 / 124 + 2)  # between 4 and 128 actors
    assert job_start_s(512) == pytest.approx(29 + 9 * 2 + 2)  # beyond 256: the slope from 128 to 256
    assert job_start_s(128, pinned=True) == pytest.approx(38 + 2)  # pinned threads: 38 s measured at 128
    assert reused_start_s(40) == pytest.approx(1.17 + 2)  # the shelf's envs: resets only


def test_a_later_run_takes_the_shelf_s_lock_step_envs_and_a_partial_batch_one_does_not():
    points, _ = stage_points("sms", [40], 132, 9, 16)
    fast = linear(fps=40_000, per_update=25_000)
    partial = plan_stage("sms", points, fast, overheads=stage_costs())
    assert {(j.start_s, j.then_s) for j in partial.jobs} == {(job_start_s(40), None)}
    lock = plan_stage("sms", points, fast, overheads=stage_costs(), shelved=lambda p: True)
    assert lock.warmup.start_s == job_start_s(40)  # the process's first envs are made
    assert {(j.start_s, j.then_s) for j in lock.jobs} == {(reused_start_s(40), None)}  # then all off the shelf
    big = [Point(300, None, None, 2), Point(300, None, 4, 2)]  # two specs of 300 envs: over the shelf's 512
    full = plan_stage("cpu", big, fast, overheads=stage_costs(), shelved=lambda p: True)
    assert all(j.start_s > reused_start_s(300) and j.then_s is None for j in full.jobs)


def runs_of(parts) -> list[tuple]:
    return sorted(
        (j.point.sm_limit or 0, r)
        for p in parts
        for j in p.jobs
        for r in range(j.point.first_repeat, j.point.first_repeat + j.point.repeats)
    )


def test_a_stage_over_one_stay_runs_in_parts_each_within_it_and_every_run_kept():
    points, _ = stage_points("sms", [40], 132, 9, 16)
    plan = plan_stage("sms", points, linear(fps=40_000, per_update=25_000), overheads=stage_costs())
    assert split_parts(plan, plan.total_s(), seed=1) == [plan]  # it fits: one process, no seeds named
    every = runs_of([plan])
    replicates = split_parts(plan, 230, seed=1)  # one replicate (4 runs, 221 s) fits, two do not
    assert [p.part for p in replicates] == [(1, 3), (2, 3), (3, 3)] and runs_of(replicates) == every
    assert all(p.total_s() <= 230 and p.warmup.point == points[0] for p in replicates)
    assert replicates[1].grids() == [
        ["actors=40", "sm_limit=null,64,16", "actor_threads=null", "workload.frames=920000", "repeats=1", "seed=10001"]
    ]
    runs = split_parts(plan, 200, seed=5)  # no replicate fits: the runs in order, as many per part as fit
    assert runs_of(runs) == every and all(p.total_s() <= 200 for p in runs) and len(runs) == 4
    assert runs[0].grids()[0][-2:] == ["repeats=1", "seed=5"] and len({p.part[1] for p in runs}) == 1
    assert parts_from_json(parts_to_json(runs, "an H200")) == runs  # the file later parts run


# --- the ratio, the idle power, the summary ---------------------------------------------------


def test_the_ratio_in_threads_per_sm_and_per_fp32_tflops_and_40_v100_sms_as_h200_sms():
    assert equivalent_sms(40, V100, H200) == pytest.approx(15.49, abs=0.01)  # 40 x 15.7/80 over 66.9/132
    r = ratio_two_units(16, H200, 16)
    assert r["threads_per_sm"] == 1.0 and r["threads_per_fp32_tflops"] == pytest.approx(16 / (66.9 * 16 / 132))
    assert ratio_two_units(40, V100, 40)["threads_per_fp32_tflops"] == pytest.approx(40 / 7.85)


class Source:
    def __init__(self, watts, available=True):
        self.available, self.reason, self.watts = available, "nvmlInit failed: library_not_found", list(watts)

    def sample(self):
        return [GpuSample(0, power_w=self.watts.pop(0) if self.watts else None)]

    def degraded_reason(self):
        return "gpu0 unsupported: power (not_supported)"


def test_idle_power_is_the_median_of_its_samples_or_null_with_the_reason():
    idle = idle_power(Source([80.0, 81.0, 200.0, 79.0]), seconds=0.4, hz=10, sleep=lambda s: None)
    assert idle == {"value": 80.5, "low": 79.0, "high": 200.0, "n": 4, "seconds": 0.4}
    assert idle_power(Source([], available=False), sleep=lambda s: None) == {
        "value": None,
        "reason": "no NVML: nvmlInit failed: library_not_found",
    }
    assert "no power reading of GPU 0" in idle_power(Source([]), seconds=0.2, sleep=lambda s: None)["reason"]


def job(sm, fps, steady=None, threads=None, status="FINISHED"):
    params = {"actors": "128", "sm_limit": str(sm), "actor_threads": str(threads)}
    m = {
        "task_fps": fps,
        "runtime_s": 200_000 / fps,
        "actor_threads_used": 16.0,
        "sm_granted": float(sm or 132),
        "power_gpu_w_avg": 130.0,
    } | ({"steady/fps": steady} if steady else {})
    return JobRun(f"r{sm}{fps}", "x", status, params, m if status == "FINISHED" else {}, {}, {}, wall_s=30.0)


def test_the_summary_gives_medians_ranges_and_the_noise_floor_beside_each_difference():
    jobs = [
        job(None, 40_000.0),
        job(None, 44_000.0),
        job(64, 30_000.0),
        job(64, 31_000.0),
        job(16, 41_000.0),
        job(8, 20_000.0, status="KILLED"),
    ]
    s = stage_summary(
        "sms",
        Study("experiment", "e", None, {}, jobs, []),
        {"gpu_name": "NVIDIA H200"},
        {"value": 80.1},
        {"budget_s": 420, "used_s": 400},
    )
    assert s["metric"] == "task_fps"  # no job logged steady/fps
    every = s["configs"][0]
    assert every["config"] == "actors=128 sm_limit=all actor_threads=null"
    assert every["task_fps"] | {} == {"median": 42_000.0, "low": 40_000.0, "high": 44_000.0, "n": 2, "spread": 4000.0}
    half, sixteen = s["differences"][0], s["differences"][1]
    assert half["change"] == pytest.approx(30_500 / 42_000 - 1) and half["noise_floor"] == pytest.approx(44 / 40 - 1)
    assert half["told_apart"] is True and sixteen["told_apart"] is False  # 42k/41k - 1 = 2.4%, within the 10% floor
    assert s["differences"][2]["value"] is None  # 8 SMs never finished
    assert s["jobs"][0]["steady/fps"] == {"value": None, "reason": NOT_LOGGED}
    assert s["jobs"][0]["start_s"]["value"] == pytest.approx(30.0 - 200_000 / 40_000)
    assert s["ratio"][0]["threads_per_sm"] == pytest.approx(16 / 132) and s["best"]["actors"] == 128
    page = stage_markdown(s)
    assert (
        "task_fps -27.4% (37.7% apart, the larger over the smaller), noise floor 10.0%; told apart" in page
        and "not told apart" in page
    )
    assert "idle GPU power before the first job: 80.1 W" in page and "40 V100 SMs" in page and "15.5 H200 SMs" in page


def test_a_jobs_start_shows_its_part_getting_the_envs_or_that_its_rlbench_did_not_log_one():
    made = job(None, 40_000.0)
    made.metrics["job_start_envs_s"] = 14.3
    s = stage_summary("actors", Study("experiment", "e", None, {}, [made, job(64, 30_000.0)], []), {}, {}, {})
    assert s["jobs"][0]["job_start_envs_s"] == {"value": 14.3}
    assert s["jobs"][1]["job_start_envs_s"] == {"value": None, "reason": NOT_LOGGED}  # a record from before it
    page = stage_markdown(s | {"run": {"budget_s": 420, "used_s": 1}})
    assert "| NVML util | start s | envs s |" in page and " | 25.0 | 14.3 |" in page


def test_the_steady_rate_is_compared_where_every_job_logged_it_and_a_warm_up_is_no_job():
    jobs = [job(None, 40_000.0, steady=45_000.0), job(64, 30_000.0, steady=33_000.0)]
    s = stage_summary(
        "sms",
        Study("experiment", "e", None, {}, jobs, []),
        {},
        {"value": None, "reason": "no NVML"},
        {"budget_s": 420, "used_s": 1},
    )
    assert s["metric"] == "steady/fps" and s["differences"][0]["noise_floor"] is None
    assert s["differences"][0]["change"] == pytest.approx(33 / 45 - 1)
    assert compare(Spread(10.0, 9.0, 11.0, 2), Spread(14.0, 13.0, 15.0, 2), 0.22)["told_apart"] is True  # 40% > 22%
    assert compare(Spread(10.0, 9.0, 11.0, 2), Spread(11.0, 10.0, 12.0, 2), 0.22)["told_apart"] is False
    assert not is_job({"role": "warmup"}) and not is_job({"rlbench.role": "sweep"}) and is_job({"repeat": "0"})


# --- the command: refusals before anything runs, the dry run -----------------------------------


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--stage", "gpu", "--dry-run"], "--stage=gpu: allowed: one of 'actors', 'sms', 'cpu'"),
        (["--stage", "actors", "--repeats", "0", "--dry-run"], "--repeats=0: allowed: an integer >= 1"),
        (["--stage", "actors", "--repeats", "1", "--dry-run"], "--repeats=1: the actors stage runs each actor count"),
        (["--stage", "sms", "--actors", "4,40", "--dry-run"], "--actors=4,40: --stage sms runs at the one best"),
        (["--stage", "cpu", "--frames", "1000", "--dry-run"], "--frames: the stages size these themselves"),
        (["--stage", "actors", "--part", "3/2", "--dry-run"], "--part=3/2: allowed: K or K/N with 1 <= K <= N"),
        (["--part", "1/2", "--dry-run"], "--part/--plan-from: allowed: with --stage only"),
        (["--stage", "sms", "--part", "2/2", "--plan-from", "docs"], "--plan-from=docs: holds no stage_plan.json"),
    ],
)
def test_bad_stage_flags_are_refused_in_one_line(gs, capsys, monkeypatch, argv, said):  # noqa: F811
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as e:
        gs.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_a_stage_without_a_gpu_is_refused_unless_dry_run_tiny_or_the_cpu_analogue(
    gs,  # noqa: F811 - the fixture imported from test_gpu_study
    monkeypatch,
    capsys,
    tmp_path,
):
    import torch

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    err = refused(gs, ["--stage", "sms", "--actors", "40", "--out", str(tmp_path / "o")], capsys)
    assert "--stage=sms: no CUDA device on this host" in err and "so there are no SMs to limit" in err
    assert "experiment=sm_sweep_cpu (the CPU analogue" in err and not (tmp_path / "o").exists()
    err = refused(gs, ["--stage", "cpu", "--out", str(tmp_path / "o")], capsys)
    assert "--stage=cpu: no CUDA device" in err


def test_a_budget_below_one_warm_up_and_one_job_is_refused(fake_h100, capsys):  # noqa: F811
    err = refused(fake_h100, ["--stage", "actors", "--dry-run", "--budget-s", "100"], capsys)
    assert "--budget-s=100: too small for one warm-up and one job of the actors stage" in err


def test_a_stage_on_a_gpu_needs_its_best_actor_count(fake_h100, capsys, tmp_path):  # noqa: F811
    err = refused(fake_h100, ["--stage", "sms", "--out", str(tmp_path / "o")], capsys)
    assert "--stage=sms: needs the best actor count; allowed: --actors N, or --best-from DIR" in err


@pytest.mark.parametrize(
    "stage, shown",
    [
        ("actors", ["actors=4 sm_limit=all actor_threads=null x 2", "actors=256 sm_limit=all actor_threads=null x 2"]),
        ("sms", ["sm_limit=64 actor_threads=null x 3", "sm_limit=8 actor_threads=null x 1"]),
        ("cpu", ["sm_limit=all actor_threads=null x 2", "sm_limit=16 actor_threads=16 x 2", "actor_threads=4 x 2"]),
    ],
)
def test_the_dry_run_prints_the_stage_with_its_warm_up_repeats_and_frames(fake_h100, capsys, stage, shown):  # noqa: F811
    code = fake_h100.main(["--stage", stage, "--dry-run", "--budget-s", "5000"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "warm-up (discarded, run `warmup`)" in out and "idle GPU power 10 s" in out
    assert all(s in out for s in shown), out
    frames = [int(line.split(": ")[1].split(" frames")[0]) for line in out.splitlines() if " x " in line]
    assert frames and all(f >= 10_000 for f in frames) and "learner updates" in out
    assert "fits" in out and "threads/SM" in out and "threads per fp32 TFLOP/s" in out


def test_the_dry_run_says_when_no_stay_can_hold_a_job_of_the_stage(fake_h100, capsys):  # noqa: F811
    code = fake_h100.main(["--stage", "actors", "--dry-run", "--budget-s", "250"])
    captured = capsys.readouterr()
    assert code == 2 and "DOES NOT FIT: nothing runs" in captured.out
    assert "no job is cut for its length" in captured.err and len(captured.err.strip().splitlines()) == 1


def gs_later(n: int) -> str:
    return "2/2" if n == 2 else f"2/{n} .. {n}/{n}"


def part_totals(out: str) -> list[float]:
    return [
        float(line.split("total predicted ")[1].split(" s")[0])
        for line in out.splitlines()
        if "total predicted" in line
    ]


def test_a_stage_over_the_stay_is_planned_in_parts_and_runs_only_part_by_part(fake_h100, capsys, tmp_path):  # noqa: F811
    code = fake_h100.main(["--stage", "actors", "--dry-run", "--out", str(tmp_path / "plan")])
    out = capsys.readouterr().out
    n = len(part_totals(out))
    assert (
        code == 0
        and n >= 2
        and f"{n} parts, each a stay of its own" in out
        and f"--part 1/{n}, then --part {gs_later(n)} with --plan-from" in out
    )
    assert all(t <= 420 for t in part_totals(out)) and out.count(": fits") == n
    assert out.count("actors=4 sm_limit=all actor_threads=null x 1") == 2  # its two repeats, one per part
    err = refused(fake_h100, ["--stage", "actors", "--out", str(tmp_path / "o")], capsys)
    assert f"runs in {n} parts, one per stay, and no job is cut; allowed: --part 1, then --part {gs_later(n)}" in err
    err = refused(fake_h100, ["--stage", "actors", "--part", f"1/{n + 1}", "--out", str(tmp_path / "o")], capsys)
    assert f"--part=1/{n + 1}: the actors stage runs in {n} part(s)" in err
    err = refused(fake_h100, ["--stage", "actors", "--part", f"{n + 1}", "--out", str(tmp_path / "o")], capsys)
    assert f"--part={n + 1}: the actors stage runs in {n} part(s)" in err and f"allowed: --part K or K/{n}" in err
    err = refused(fake_h100, ["--stage", "actors", "--part", f"2/{n}", "--out", str(tmp_path / "o")], capsys)
    assert "a later part runs the plan its part 1 made" in err and not (tmp_path / "o").exists()
    code = fake_h100.main(["--stage", "actors", "--dry-run", "--part", f"2/{n}", "--plan-from", str(tmp_path / "plan")])
    assert code == 0 and "stage_plan.json (its part 1's), not re-planned here" in capsys.readouterr().out
    smaller = [
        "--stage",
        "actors",
        "--dry-run",
        "--part",
        "1",
        "--plan-from",
        str(tmp_path / "plan"),
        "--budget-s",
        "300",
    ]
    assert "planned for a larger stay, and no job is cut" in refused(fake_h100, smaller, capsys)
    err = refused(
        fake_h100, ["--stage", "sms", "--dry-run", "--part", f"2/{n}", "--plan-from", str(tmp_path / "plan")], capsys
    )
    assert (
        "a plan of the actors stage for NVIDIA H100 80GB HBM3 (132 SMs); allowed: the --out of part 1 of the sms" in err
    )


def test_a_later_parts_dry_run_without_a_gpu_models_the_gpu_its_plan_was_made_for(gs, monkeypatch, capsys):  # noqa: F811
    """results/h200/actors-1 is the actors stage's part 1 as an H200 planned it; modelling the
    default H100 refused it (--plan-from: a plan ... for NVIDIA H200)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    plan = str(ROOT / "results" / "h200" / "actors-1")
    code = gs.main(["--stage", "actors", "--dry-run", "--part", "2", "--plan-from", plan])
    out = capsys.readouterr().out
    assert code == 0 and "stage actors for NVIDIA H200 (132 SMs)" in out and "part 2/3" in out
    err = refused(gs, ["--stage", "actors", "--dry-run", "--part", "2", "--plan-from", plan, "--gpu", "H100"], capsys)
    assert "a plan of the actors stage for NVIDIA H200 (132 SMs); allowed: the --out of part 1" in err


# --- end to end ---------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_cpu_stage_rehearsal_warms_up_measures_idle_power_and_summarises(tmp_path):
    """--stage cpu --tiny on this CPU with the GPU fakes: what only a real run shows: the stage's
    process (idle power from the fake NVML, the warm-up run, the sweeps in one process, the pairs
    through the interpolation) and the summary read back from its store."""
    out = tmp_path / "cpu"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_gpu"), str(ROOT)]),
        "PYTHONUNBUFFERED": "1",
        "HYDRA_FULL_ERROR": "0",
    }
    cmd = [
        sys.executable,
        "pipelines/gpu_study.py",
        "--stage",
        "cpu",
        "--tiny",
        "--out",
        str(out),
        "tracking.system_metrics=false",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["idle_power_gpu_w"]["value"] == pytest.approx(100.0)  # the fake GPU draws 100 W
    assert {j["name"] for j in s["jobs"]} >= {
        "actors=8 sm_limit=1 actor_threads=1",
        "actors=8 sm_limit=2 actor_threads=2",
        "actors=8 sm_limit=all actor_threads=null",
    }
    assert all(j["status"] == "FINISHED" for j in s["jobs"]) and len(s["jobs"]) == 5  # the warm-up is not one
    assert s["jobs"][0]["power_gpu_w_avg"]["value"] == pytest.approx(100.0, rel=0.05)
    mlflow.set_tracking_uri(f"sqlite:///{out}/mlruns/mlflow.db")
    runs = mlflow.search_runs(experiment_names=[s["run"]["experiment"]], output_format="list")
    warm = [r for r in runs if r.info.run_name == "warmup"]
    assert len(warm) == 1 and warm[0].data.tags["role"] == "warmup" and warm[0].info.status == "FINISHED"
    idle = [r for r in runs if r.info.run_name == "idle power"]
    assert idle[0].data.metrics["idle_power_gpu_w"] == pytest.approx(100.0)
    assert min(r.info.start_time for r in idle) < warm[0].info.start_time  # measured before the first job


def test_the_cpu_analogue_s_warm_up_is_one_job_its_preset_grid_left_to_the_stage(monkeypatch, tmp_path):
    """experiment=sm_sweep_cpu defines sm_limit=2,1, which a single run (the warm-up) refuses: the
    stage's commands drop the preset's grid, its own grids being the sweeps."""
    import time
    from types import SimpleNamespace

    from rlbench.cli import gpu_stage
    from rlbench.cli.gpu_study import TINY
    from rlbench.predict.study_host import Host
    from rlbench.prepare import preflight
    from rlbench.prepare.command_line import precheck

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(preflight, "check", lambda uri: None)
    monkeypatch.setattr(gpu_stage, "run_sweep", lambda *a, **k: SimpleNamespace(code=0, stopped=False, seconds=0.0))
    monkeypatch.setattr(gpu_stage, "stage_finish", lambda *a, **k: None)
    points = [Point(8, None, None, 1), Point(8, 1, None, 1)]
    plan = plan_stage("sms", points, linear(fps=1000, per_update=500), 1500, stage_costs())
    args = SimpleNamespace(out=tmp_path / "o", stage="sms", budget_s=420.0, argv=[])
    host = Host("cpu", None, 2, 2, True, {"host": "t"})
    assert gpu_stage.run_stage(args, host, plan, [*TINY, "experiment=sm_sweep_cpu"], time.monotonic()) == 0
    spec = json.loads((tmp_path / "o" / "stage.json").read_text())
    assert precheck([*spec["common"], *spec["warmup"]]) is None
    assert precheck(["-m", *spec["common"], *spec["grids"][0]]) is None


def a_part(folder, gpu: str, watts: float, experiment: str) -> None:
    (folder / "mlruns").mkdir(parents=True)
    (folder / "mlruns" / "mlflow.db").write_text("")  # the store: load_experiment is faked below
    run = {
        "experiment": experiment,
        "budget_s": 420,
        "used_s": 400,
        "task": "env=pong; part 1/2 of the stage",
        "events": [],
    }
    summary = {"stage": "sms", "fingerprint": {"gpu_name": gpu}, "idle_power_gpu_w": {"value": watts}, "run": run}
    (folder / "summary.json").write_text(json.dumps(summary))


def test_the_parts_join_into_one_stage_summary_over_every_part_s_runs(gs, monkeypatch, tmp_path, capsys):  # noqa: F811
    from rlbench.tracking import store, study_records

    runs = {"e1": [job(None, 40_000.0), job(64, 30_000.0)], "e2": [job(None, 44_000.0), job(64, 31_000.0)]}
    monkeypatch.setattr(store, "use_store", lambda uri: None)
    monkeypatch.setattr(
        study_records, "load_experiment", lambda name: Study("experiment", name, None, {}, runs[name], [])
    )
    a_part(tmp_path / "p1", "NVIDIA H200", 80.0, "e1")
    a_part(tmp_path / "p2", "NVIDIA H200", 82.0, "e2")
    parts = f"{tmp_path / 'p1'},{tmp_path / 'p2'}"
    assert gs.main(["--stage", "sms", "--join", parts, "--out", str(tmp_path / "all")]) == 0
    s = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert s["configs"][0]["task_fps"] | {} == {
        "median": 42_000.0,
        "low": 40_000.0,
        "high": 44_000.0,
        "n": 2,
        "spread": 4000.0,
    }
    assert s["differences"][0]["noise_floor"] == pytest.approx(44 / 40 - 1)  # the repeats of two parts
    assert s["idle_power_gpu_w"]["value"] == 81.0 and s["run"]["task"] == "env=pong; 2 parts joined"
    assert "81.0 W (the median of 2 parts' medians, 80.0..82.0 W, NVML)" in capsys.readouterr().out
    a_part(tmp_path / "h100", "NVIDIA H100 80GB HBM3", 70.0, "e2")
    err = refused(
        gs, ["--stage", "sms", "--join", f"{tmp_path / 'p1'},{tmp_path / 'h100'}", "--out", str(tmp_path / "x")], capsys
    )
    assert "never H100 numbers with H200 ones" in err and not (tmp_path / "x").exists()


def test_a_later_stage_plans_the_start_its_actors_stage_recorded(fake_h100, capsys, tmp_path):  # noqa: F811
    named = "actors=128 sm_limit=all actor_threads=null"
    jobs = [{"name": named, "start_s": {"value": v}} for v in (30.0, 34.0)] + [
        {"name": "actors=4 sm_limit=all actor_threads=null", "start_s": {"value": 9.0}}
    ]
    (tmp_path / "summary.json").write_text(json.dumps({"stage": "actors", "best": {"actors": 128}, "jobs": jobs}))
    code = fake_h100.main(["--stage", "cpu", "--dry-run", "--best-from", str(tmp_path), "--budget-s", "5000"])
    out = capsys.readouterr().out
    assert code == 0 and "start and end at 128 actors 32.0 s (the median of 2 runs of the actors stage" in out
    assert "actor_threads=null x 2" in out and "+ 32 s start and end" in out  # not the H200's 22 s
    assert "actor_threads=8 x 2" in out and f"+ {32 * 1.9:.0f} s start and end" in out  # pinned: x1.9
    assert "a job's start on the H200" not in out


def test_a_stage_whose_jobs_have_no_steady_rate_compares_task_fps():
    """A median window of 0 frames/s (actors held by the replay ratio run in bursts) is no rate."""
    from types import SimpleNamespace

    from rlbench.core.repeats import spread
    from rlbench.report.stage_summary import compare, rate_metric

    def job(v):
        return SimpleNamespace(value=lambda k: v if k == "steady/fps" else None)

    assert rate_metric(SimpleNamespace(finished=[job(1175.9), job(3029.9)])) == "steady/fps"
    assert rate_metric(SimpleNamespace(finished=[job(1175.9), job(0.0)])) == "task_fps"
    assert compare(spread([0.0, 0.0]), spread([1.0, 2.0]), None)["change"] is None


def test_a_difference_at_the_floors_edge_is_printed_in_the_verdicts_measure_with_the_digits_that_tell():
    """The CPU analogue's cpu stage printed "-3.4%, noise floor 3.5%; told apart": the change
    is signed (other over base), the test the larger over the smaller (3.53% > 3.52%)."""
    from rlbench.report.stage_summary import _difference

    d = {"other": "t=2", "base": "t=null", "metric": "steady/fps", "change": 2572.5 / 2663.2 - 1}
    line = _difference(d | {"noise_floor": 2617.0 / 2528.0 - 1, "told_apart": True})
    assert line.endswith("steady/fps -3.4% (3.53% apart, the larger over the smaller), noise floor 3.52%; told apart")
    line = _difference(d | {"noise_floor": 0.10, "told_apart": False})
    assert "(3.5% apart, the larger over the smaller), noise floor 10.0%; not told apart" in line
