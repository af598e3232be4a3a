"""pipelines/gpu_study.py: the plan, its budget and its refusals (fast, with the GPU faked), the
pieces it is made of, and once end to end on a tiny task with the GPU fakes (e2e)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import mlflow
import pytest

from rlbench.cli.run_and_report import run_sweep
from rlbench.core.resources import DeviceProperties, green_context_problem
from rlbench.predict import study_host, study_predictor
from rlbench.predict.datasheet import Flops, Gpu, gpu_tables, peak_tflops
from rlbench.predict.study_plan import Overheads, PlanError, build_plan, fit_stage, over_budget, size_frames, sm_points
from rlbench.report.one_page import markdown, precision_ratio, slowdown_at_half, summary
from rlbench.tracking.study_records import JobRun, Study
from tests.conftest import ROOT

H100 = Gpu("NVIDIA H100 80GB HBM3", 132, 9)


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_study", ROOT / "pipelines" / "gpu_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gs():
    return load_script()


# --- the plan -------------------------------------------------------------------------------


def test_the_sm_points_are_all_half_a_quarter_16_and_8_as_a_green_context_grants_them():
    assert sm_points(132, 9) == [None, 64, 32, 16, 8]  # H100/H200: multiples of 8
    assert sm_points(114, 9) == [None, 56, 24, 16, 8]  # H100 PCIe: 57 and 28 rounded down to a grant
    assert sm_points(108, 8) == [None, 54, 26, 16, 8]  # A100: multiples of 2
    assert sm_points(2, None) == [None, 1]  # CPU threads: half of 2; a quarter, 16 and 8 do not fit


def costs(sweep_start_s: float, job_s: float, report_s: float) -> Overheads:
    return Overheads(sweep_start_s=sweep_start_s, job_s=job_s, report_s=report_s)


def rate_predict(knobs, frames):
    """A known answer: fps 1000 x actors up to 40 actors, flat beyond; half the SMs 20% slower."""
    fps = 1000.0 * min(knobs["actors"], 40) * (0.8 if knobs["sm_limit"] else 1.0)
    fps *= 1.5 if knobs["precision"] == "bf16" else 1.0
    return frames / fps, "env stepping"


def test_the_plan_runs_the_later_stages_at_the_best_actor_count_and_reuses_its_job():
    plan = build_plan([4, 40, 256], [None, 64], "bf16", 100_000, rate_predict, costs(20, 5, 30))
    assert plan.best_actors == 40 and [j.name for j in plan.stage("sms")] == [
        "actors=40 sm_limit=all precision=fp32",
        "actors=40 sm_limit=64 precision=fp32",
    ]
    assert plan.stage("sms")[0].reused and plan.stage("sms")[0].seconds(plan.overheads) == 0
    # 3 stages' starts + 5 jobs of 5 s + their tasks + the report
    tasks = 100_000 / 4000 + 100_000 / 40000 + 100_000 / 40000 + 100_000 / 32000 + 100_000 / 60000
    assert plan.total_s() == pytest.approx(3 * 20 + 5 * 5 + tasks + 30)


def test_frames_are_sized_to_fill_at_most_three_quarters_of_the_budget():
    def make(frames):
        return build_plan([4, 40], [None], None, frames, rate_predict, costs(10, 0, 0))

    plan = size_frames(make, budget_s=200, ladder=(100_000, 200_000, 400_000, 800_000))
    assert plan.frames == 400_000 and plan.total_s() <= 150 < make(800_000).total_s()


def test_a_budget_below_the_smallest_plan_names_the_job_to_cut():
    def make(frames):
        return build_plan([4, 40, 256], [None, 64], "bf16", frames, rate_predict, costs(10, 0, 0))

    with pytest.raises(PlanError) as e:
        size_frames(make, budget_s=50, ladder=(200_000, 400_000))
    # tasks 50 + 5 + 5 (actors 4, 40, 256) + 6.25 (64 SMs) + 3.3 (bf16) s, 3 sweeps' starts of 10 s
    assert "--budget-s=50: the plan's predicted 100 s exceed 75% of the budget (38 s)" in str(e.value)
    assert "cut the job actors=4 sm_limit=all precision=fp32 of the actor sweep (predicted 50 s" in str(e.value)
    assert "--actors 40,256" in str(e.value) and "--budget-s >= 133" in str(e.value)
    slow_sm = build_plan([40], [None, 8], None, 100_000, lambda k, f: (100.0 if k["sm_limit"] else 1.0, ""))
    assert "--sm-limits all" in over_budget(slow_sm, 10, 10)


def test_a_stage_cut_to_the_time_left_drops_its_longest_jobs_first():
    plan = build_plan([4, 16, 40], [None], None, 100_000, rate_predict, costs(10, 5, 0))
    kept, cut = fit_stage(plan.stage("actors"), left_s=40, o=plan.overheads)
    assert [j.actors for j in cut] == [4] and [j.actors for j in kept] == [16, 40]
    assert fit_stage(plan.stage("actors"), left_s=5, o=plan.overheads)[0] == []


def test_the_datasheet_gpu_is_slower_on_fewer_sms_and_its_bf16_update_faster():
    flops = Flops(587e9, 24e6)
    inference, update = gpu_tables(H100, "fp32", flops, [8, 132], [1, 256])
    at = {(r["units"], r["batch"]): r["seconds"] for r in inference}
    assert at[(8, 256)] > at[(132, 256)] > at[(132, 1)]
    assert update[0]["seconds"] > update[1]["seconds"]  # 8 SMs, then 132
    _, bf16 = gpu_tables(H100, "bf16", flops, [132], [1])
    assert bf16[0]["seconds"] < update[1]["seconds"]
    with pytest.raises(ValueError, match="no published fp32 peak for GPU 'RTX 9999'; allowed: .*H100"):
        peak_tflops(Gpu("RTX 9999", 10, 9), "fp32")


# --- pieces it uses -------------------------------------------------------------------------


def test_a_green_context_is_tried_in_a_child_and_its_error_named():
    def child(ok: bool, err: str = ""):
        def run(cmd, **kw):
            assert cmd[-2:] == ["0", "8"] and "GreenContext.create" in cmd[2]
            return subprocess.CompletedProcess(cmd, 0 if ok else 1, "green context ok 1024.0\n" if ok else "", err)

        return run

    assert green_context_problem(0, 8, run=child(True)) is None
    why = green_context_problem(0, 8, run=child(False, "Traceback ...\nRuntimeError: CUDA driver too old"))
    assert why == "a green context of 8 SMs on cuda:0 could not be made or used (RuntimeError: CUDA driver too old)"


def test_a_sweep_is_stopped_at_its_time_limit_and_one_within_it_is_not():
    t0 = time.monotonic()
    stopped = run_sweep(["30"], timeout_s=3.0, grace_s=10, module="tests.sweep_stand_in")  # 3 s: it has started
    assert stopped.stopped and stopped.code == 143 and stopped.parent == "a" * 32
    assert time.monotonic() - t0 < 20
    done = run_sweep(["0.1"], timeout_s=20, module="tests.sweep_stand_in")
    assert not done.stopped and done.code == 0


def job(actors, runtime, sm=None, prec="fp32", status="FINISHED", metrics=None, nulls=None):
    params = {"actors": str(actors), "sm_limit": str(sm), "precision": prec}
    m = {"runtime_s": runtime, "fps": 40000.0 / runtime} | (metrics or {}) if runtime is not None else {}
    name = f"actors={actors} sm_limit={sm} precision={prec}"
    return JobRun(name, name, status, params, m, nulls or {}, {"compute_unit": "sm"})


def test_the_summary_gives_the_slowdown_at_half_the_sms_the_ratio_and_nulls_with_reasons():
    jobs = [
        job(4, 40.0),
        job(40, 10.0, metrics={"energy_per_task_j": 3000.0, "gpu_busy_frac": 0.25}),
        job(256, 11.0),
        job(40, 12.5, sm=64),
        job(40, 8.0, prec="bf16"),
        job(40, None, sm=8, status="KILLED"),
    ]
    study = Study("experiment", "gpu_study", None, {"host": "h", "gpu_name": "NVIDIA H100"}, jobs, [])
    assert slowdown_at_half(study, 40, 64)["value"] == pytest.approx(0.25)
    assert precision_ratio(study, 40, "bf16")["value"] == pytest.approx(1.25)
    assert slowdown_at_half(study, 40, 8) == {
        "value": None,
        "reason": "the job at 40 actors with sm_limit=8 did not finish",
    }
    s = summary(
        study,
        {"git_commit": "abc"},
        40,
        64,
        "bf16",
        {"actors=40 sm_limit=all precision=fp32": 9.0},
        {"command": "x", "budget_s": 420, "used_s": 300, "task": "pong", "events": ["stopped at the budget"]},
    )
    row = next(r for r in s["jobs"] if r["name"] == "actors=40 sm_limit=all precision=fp32")
    assert row["gpu_busy_s"] == {"value": 2.5} and row["predicted_runtime_s"] == 9.0
    assert row["energy_per_task_j"] == {"value": 3000.0}
    killed = next(r for r in s["jobs"] if r["status"] == "KILLED")
    assert killed["runtime_s"] == {"value": None, "reason": "job KILLED"}
    assert s["knee"]["value"] == 40 and s["cpu_gpu_ratio"]["value"] is None  # the jobs logged no ratio
    page = markdown(s)
    assert "slowdown at half the SMs: +25.0% (sm_limit=64 at 40 actors)" in page
    assert "precision: 1.250 (runtime_s fp32 / bf16 at 40 actors)" in page and "- stopped at the budget" in page
    assert "| FINISHED | 10.0 (9.0) | 4000 | 3000 | 2.5 |" in page and "| KILLED | null [2] | null [2] |" in page
    assert "- [1] not logged by this job" in page and "- [2] job KILLED" in page


# --- the command: refusals before any job, the dry run ----------------------------------------


@pytest.fixture
def fake_h100(gs, monkeypatch):
    """A host whose one GPU is a fake H100; env stepping and the FLOPs count faked (no work)."""
    import torch

    from rlbench.predict import measure
    from rlbench.tracking import fingerprint

    monkeypatch.chdir(ROOT)  # main() moves to the clone; put back after
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        fingerprint, "host_tags", lambda: {"host": "fake", "git_commit": "abc", "cuda_available": "True"}
    )
    monkeypatch.setattr(study_host, "cuda_properties", lambda i: DeviceProperties(H100.name, 132, 9))
    monkeypatch.setattr(study_host, "green_context_problem", lambda i, sms: None)
    monkeypatch.setattr(study_host, "usable_cpus", lambda: list(range(16)))
    rows = [{"threads": 16, "envs": e, "sps": 16 / 8e-4, "env_step_s": 8e-4, "reset_s": 0.01 * e} for e in (4, 16, 40)]
    monkeypatch.setattr(study_predictor, "measured_env", lambda conf, threads, actors: rows)
    monkeypatch.setattr(measure, "counted_flops", lambda conf: (587e9, 24e6))
    return gs


def refused(gs, argv, capsys) -> str:
    code = gs.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err


def test_the_dry_run_prints_every_job_its_predicted_time_and_the_total(fake_h100, capsys):
    assert fake_h100.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "plan for NVIDIA H100 80GB HBM3 (132 SMs), 16 CPU threads" in out
    for name in ("actors=4 sm_limit=all", "actors=256 sm_limit=all", "sm_limit=64", "sm_limit=8", "precision=bf16"):
        assert name in out
    assert out.count("predicted ") >= 10 and "reused: the actor sweep's job" in out
    total = float(out.split("total predicted: ")[1].split(" s")[0])
    assert 0 < total <= 0.75 * 420  # sized to fit 3/4 of the default budget
    assert "estimate: NVIDIA H100 80GB HBM3 (132 SMs) from its datasheet" in out


def test_a_budget_below_the_smallest_plan_is_refused_naming_the_job_to_cut(fake_h100, capsys):
    err = refused(fake_h100, ["--dry-run", "--budget-s", "60"], capsys)
    assert (
        "--budget-s=60: the plan's predicted" in err
        and "cut the job actors=4" in err
        and "--actors 16,40,128,256" in err
    )


def test_an_explicit_task_over_the_budget_is_refused(fake_h100, capsys):
    err = refused(fake_h100, ["--dry-run", "--frames", "5000000", "--actors", "4,40"], capsys)
    assert "at workload.frames=5000000; cut the job actors=4" in err and "--actors 40" in err


def test_a_gpu_without_green_contexts_is_refused_with_the_way_out(fake_h100, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(
        study_host, "green_context_problem", lambda i, sms: "a green context ... (CUDA_ERROR_NOT_SUPPORTED)"
    )
    err = refused(fake_h100, ["--out", str(tmp_path / "o")], capsys)
    assert "--sm-limits: NVIDIA H100 80GB HBM3 (compute capability 9.x) gave no green context" in err
    assert "CUDA 12.4" in err and "or --sm-limits none" in err and not (tmp_path / "o").exists()


def test_a_host_without_cuda_is_refused_unless_dry_run_or_tiny(gs, monkeypatch, capsys, tmp_path):
    import torch

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    err = refused(gs, ["--out", str(tmp_path / "o")], capsys)
    assert "no CUDA device on this host" in err and "--dry-run" in err and "--tiny" in err
    err = refused(gs, ["--out", str(tmp_path / "o"), "--gpu", "H200"], capsys)
    assert "--gpu/--host-threads: they model another host in a dry run; allowed: only with --dry-run" in err
    err = refused(gs, ["--dry-run", "--gpu", "RTX 9999"], capsys)
    assert "--gpu=RTX 9999: no published SM count for it; allowed: a name containing H100" in err
    err = refused(gs, ["--dry-run", "algo.no_such_key=1"], capsys)
    assert "algo.no_such_key" in err


def test_more_sms_than_the_gpu_has_are_refused(fake_h100, capsys):
    err = refused(fake_h100, ["--dry-run", "--sm-limits", "all,200"], capsys)
    assert "--sm-limits=all,200: 200 is more than the 132 units here; allowed: 1..132 and all" in err


def test_bf16_on_a_cpu_without_it_is_refused_before_any_job(gs, monkeypatch, capsys, tmp_path):
    import torch

    from rlbench.core import precision

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision, "cpu_flags", lambda path="/proc/cpuinfo": frozenset())
    err = refused(gs, ["--tiny", "--out", str(tmp_path / "o")], capsys)
    assert "--compare=bf16: precision=bf16: no fast bf16 math" in err and "--compare none" in err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--out", "{file}"], "--out={file}: exists and is not a folder"),
        (["--out", "{store}"], "already holds a study's store"),
        ([], "--out: required"),
        (["--dry-run", "--actors", "4,4"], "--actors=4,4: allowed: distinct comma-separated integers >= 1"),
        (["--dry-run", "--sm-limits", "0"], "--sm-limits=0: allowed: auto (all, half, a quarter, 16 and 8), none"),
        (["--dry-run", "--frames", "many"], "--frames=many: allowed: an integer >= 1 (or auto: sized to the budget)"),
        (["--dry-run", "--budget-s", "0"], "--budget-s=0: allowed: a finite number > 0"),
        (["--dry-run", "--compare", "fp8"], "--compare=fp8: allowed: one of 'tf32', 'bf16', 'fp16', 'none'"),
    ],
)
def test_bad_flags_are_refused_in_one_line_naming_them(gs, capsys, tmp_path, monkeypatch, argv, said):
    monkeypatch.chdir(ROOT)
    (tmp_path / "file").write_text("x")
    (tmp_path / "store" / "mlruns").mkdir(parents=True)
    (tmp_path / "store" / "mlruns" / "mlflow.db").write_text("")
    where = {"file": str(tmp_path / "file"), "store": str(tmp_path / "store")}
    with pytest.raises(SystemExit) as e:
        gs.main([a.format(**where) for a in argv])
    err = capsys.readouterr().err
    assert e.value.code == 2 and said.format(**where) in err and len(err.strip().splitlines()) == 1, err


# --- end to end ---------------------------------------------------------------------------------


@pytest.mark.e2e
def test_the_rehearsal_runs_the_whole_study_with_the_gpu_fakes_and_brings_its_record(tmp_path):
    """--tiny on this CPU: the actor sweep (4, 8), the SM sweep (every CPU thread and one), bf16
    (the fake CPU flags), the report and the summary; NVML energy from the fake GPU of
    tests/fake_gpu/sitecustomize.py (100 W) in every job."""
    out = tmp_path / "study"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_gpu"), str(ROOT)]),
        "PYTHONUNBUFFERED": "1",
        "HYDRA_FULL_ERROR": "0",
    }
    cmd = [
        sys.executable,
        "pipelines/gpu_study.py",
        "--tiny",
        "--out",
        str(out),
        "--budget-s",
        "600",
        "tracking.system_metrics=false",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert [(r["stage"], r["status"]) for r in s["jobs"]].count(("actors", "FINISHED")) == 2
    assert {r["stage"] for r in s["jobs"]} == {"actors", "sms", "precision"}
    assert all(r["energy_per_task_j"]["value"] > 0 for r in s["jobs"])  # the fake GPU's NVML counter
    assert all("no CUDA device" in r["gpu_busy_s"]["reason"] for r in s["jobs"])  # a CPU: null, with why
    assert s["slowdown_at_half_sms"]["sm_limit"] == max(1, len(os.sched_getaffinity(0)) // 2)
    assert s["precision_ratio"]["value"] > 0 and s["knee"]["text"]
    assert "# GPU study on" in (out / "summary.md").read_text() and (out / "report" / "report.html").is_file()
    assert json.loads((out / "plan.json").read_text())["frames"] == 1500
    assert all((out / "multirun" / st / "0").is_dir() for st in ("actors", "sms", "precision")), "a stage's jobs lost"
    mlflow.set_tracking_uri(f"sqlite:///{out}/mlruns/mlflow.db")  # the portable form: artifacts beside it
    exp = mlflow.get_experiment_by_name(s["run"]["experiment"])
    assert exp.artifact_location == f"rlbench-store:/{exp.name}" and (out / "mlruns" / exp.name).is_dir()
