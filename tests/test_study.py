"""The study's command (pipelines/study.py, rlbench/api/study.py): its dry run, its refusals, and a
study stopped mid-way by SIGTERM that continues with resume=true and ends with one report over
all its jobs, each job's host named."""

import json
import signal
import socket
import subprocess
import sys

import mlflow
import pytest

from tests.conftest import ROOT, wait_until

STUDY = "pipelines/study.py"


def study(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, STUDY, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def store_args(tmp_path) -> list[str]:
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    return [
        f"tracking.uri={uri}",
        f"tracking.artifact_location={tmp_path}/artifacts",
        "tracking.system_metrics=false",
        f"hydra.sweep.dir={tmp_path}/multirun",
    ]


def job_runs(uri: str) -> list:
    """The study's job runs (no parent, report, idle power or warm-up) as the store holds them."""
    mlflow.set_tracking_uri(uri)
    exp = mlflow.get_experiment_by_name("study-CartPole-v1")
    if exp is None:
        return []
    runs = mlflow.search_runs([exp.experiment_id], output_format="list")
    return [r for r in runs if "rlbench.role" not in r.data.tags and r.data.tags.get("role") != "warmup"]


@pytest.mark.e2e  # the real command, in a process of its own
@pytest.mark.parametrize(
    "args, says",
    [
        (["--stages", "actors,nope"], "--stages=actors,nope: allowed: distinct comma-separated names of actors, sms"),
        (["--repeats", "0"], "--repeats=0: allowed: an integer >= 1"),
        (["--tiny", "--dry-run", "actors=abc"], "actors=abc: allowed: an integer"),
        (["--tiny", "--dry-run", "env=nope"], "env=nope: no such env preset"),
    ],
)
def test_the_study_refuses_bad_input_in_one_line_before_any_job(args, says):
    out = study(*args, timeout=120)
    assert out.returncode == 2 and out.stderr.startswith(f"{STUDY}: ") and says in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.e2e
def test_the_dry_run_prints_each_stage_its_jobs_and_what_this_host_leaves_out(tmp_path):
    out = study("--dry-run", *store_args(tmp_path), timeout=200)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for stage in ("actors", "sms", "cpu", "precision"):
        assert f"[study] stage {stage}: " in text
    assert "[study]   actors=4" in text and "[study]   actors=256" in text and "precision=bf16" in text
    assert "no estimate: no profile of this host for pong, r2d2, fp32 (make one: python -m rlbench.profile" in text
    assert not (tmp_path / "mlflow.db").exists() or job_runs(f"sqlite:///{tmp_path}/mlflow.db") == []


@pytest.mark.e2e
def test_a_study_stopped_by_sigterm_continues_with_resume_and_ends_with_one_report(tmp_path):
    uri, args = f"sqlite:///{tmp_path}/mlflow.db", [*store_args(tmp_path), "--tiny", "--repeats", "1"]
    args += ["--out", str(tmp_path / "out")]
    with subprocess.Popen(
        [sys.executable, STUDY, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        wait_until(lambda: len([r for r in job_runs(uri) if r.info.status == "FINISHED"]) >= 3, 240, "3 jobs done")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.strip().splitlines()[-1].startswith(f"{STUDY}: stopped by SIGTERM"), err
    before = [r for r in job_runs(uri) if r.info.status == "FINISHED"]
    assert not (tmp_path / "out" / "summary.json").exists()  # stopped: no report yet

    out = study(*args, "resume=true", timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    finished = [r for r in job_runs(uri) if r.info.status == "FINISHED"]
    assert {r.info.run_id for r in before} <= {r.info.run_id for r in finished}  # kept
    for work in {r.data.tags["config_hash"] for r in before}:  # and not run again: resume took them
        assert sum(r.data.tags["config_hash"] == work for r in finished) == sum(
            r.data.tags["config_hash"] == work for r in before
        )
    assert len(finished) > len(before)  # the rest ran (the stop may have caught a job, a warm-up or neither)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [s["status"] for s in summary["stages"]] == ["FINISHED"] * 4
    assert [len(s["jobs"]) for s in summary["stages"]] == [2, 2, 2, 2]  # 4 stages x 2 configurations
    assert {h["host"] for h in summary["hosts"]} == {socket.gethostname()}
    assert len(summary["hosts"]) == len(job_runs(uri))  # every job run of the study, the killed one too
    said = f"rlbench report: experiment study-CartPole-v1 ({len(finished)}/{len(job_runs(uri))} jobs finished)"
    assert said in out.stdout  # one report over every job
    assert (tmp_path / "out" / "report.html").is_file()
