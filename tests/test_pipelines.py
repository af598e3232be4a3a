"""pipelines/: one command runs the experiment and ends with its report on the parent run."""

import re
import subprocess
import sys

import mlflow
import pytest

from rlbench.cli.run_and_report import merge, tracking_uri
from tests.conftest import CARTPOLE_TINY, ROOT


def pipeline(script: str, *args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """`python <script> <args>` from the repository's root: its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, script, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_actor_path_bench_counts_idle_and_iowait_as_the_hosts_idle_share():
    import collections
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_actor_path", ROOT / "pipelines" / "bench_actor_path.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    times = collections.namedtuple("scputimes", "user nice system idle iowait irq softirq steal guest guest_nice")
    before, after = times(10, 0, 5, 100, 1, 0, 0, 0, 0, 0), times(40, 0, 15, 150, 11, 0, 0, 0, 4, 0)
    assert bench.idle_share(before, after) == pytest.approx(0.6)  # 60 of 100 s: guest time is inside user's
    assert bench.idle_share(before, before) is None  # no time passed: unknown, not 0


def test_extra_overrides_replace_the_pipelines_own():
    assert merge(["experiment=sm_sweep_cpu", "actors=8", "workload=smoke"], ["actors=2", "env=cartpole"]) == [
        "experiment=sm_sweep_cpu",
        "workload=smoke",
        "actors=2",
        "env=cartpole",
    ]


def test_pipeline_reports_from_the_store_the_jobs_use(monkeypatch):
    assert tracking_uri(["actors=2,4", "tracking.uri=sqlite:///x.db"]) == "sqlite:///x.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking_uri(["experiment=actor_sweep"]) == "sqlite:///mlruns/mlflow.db"


@pytest.mark.e2e
def test_quick_sm_sweep_pipeline_ends_with_its_report(store, tmp_path):
    cmd = [
        "pipelines/sm_sweep.py",
        "--quick",
        "--report-out",
        str(tmp_path / "report"),
        *CARTPOLE_TINY,
        "actors=2",
        "telemetry.rate_hz=2",
        *store["overrides"],
    ]
    out = pipeline(*cmd, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    parent = re.search(r"parent run ([0-9a-f]{32})", out.stdout).group(1)
    assert "rlbench report: sm_sweep_cpu" in out.stdout and "(2/2 jobs finished)" in out.stdout
    mlflow.set_tracking_uri(store["uri"])
    logged = {a.path for a in mlflow.MlflowClient().list_artifacts(parent, "report")}
    assert {"report/report.html", "report/fig4_sm_scaling.png"} <= logged
    page = (tmp_path / "report" / "report.html").read_text()
    assert parent in page and 'src="data:image/png;base64,' in page  # this sweep's report, figures inline


@pytest.mark.e2e
def test_pipeline_refused_before_any_job_gets_no_report(store):
    out = pipeline("pipelines/actor_sweep.py", "--quick", "actors=2,0", *store["overrides"], timeout=120)
    assert out.returncode == 2 and "no report" in out.stderr and "actors" in out.stderr


@pytest.mark.e2e
def test_inference_batch_benchmark_refuses_bad_arguments_before_any_job():
    for bad, said in (
        (["--repeats", "0"], "--repeats=0: allowed: an integer >= 1"),
        (["--actors", "40,x"], "--actors=40,x: allowed: comma-separated integers >= 1"),
        (["--actors", "40,40"], "allowed: distinct actor counts"),
        (["--threads", "nan"], "--threads=nan: allowed: an integer >= 0 (0 = all hardware threads)"),
        (["inference_batch=3"], "inference_batch=3: allowed: overrides other than inference_batch"),
    ):
        out = pipeline("pipelines/bench_inference_batch.py", *bad)
        assert out.returncode == 2 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_startup_benchmark_refuses_bad_arguments_before_any_job():
    for bad, said in (
        (["--repeats", "0"], "--repeats=0: allowed: an integer >= 1"),
        (["--envs", "4", "x"], "--envs=x: allowed: an integer >= 1"),
    ):
        out = pipeline("pipelines/bench_startup.py", *bad)
        assert out.returncode == 2 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_main_benchmark_refuses_its_unknown_flags_and_names_a_failed_command_in_one_line():
    for bad, said in (
        (["--fast"], "unrecognized arguments: --fast"),
        (
            ["--", "actors=0"],
            "the command failed (exit 2): rlbench: invalid config: actors=0: allowed: an integer >= 1",
        ),
    ):
        out = pipeline("pipelines/bench_main.py", *bad, timeout=120)
        assert said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert out.returncode == (2 if bad[0] == "--fast" else 1), out


def test_the_hot_path_bench_splits_a_step_by_the_servers_operations_and_names_the_rest():
    import importlib.util

    import numpy as np

    from rlbench.telemetry.timing import OpTimer

    spec = importlib.util.spec_from_file_location("bench_inference", ROOT / "pipelines" / "bench_inference.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    class Server:  # InferenceServer's timer, as its step feeds it
        timer = OpTimer("inference")

        def step(self, batch):
            self.timer.add("h2d_transfer", 0.001)
            self.timer.add("forward", 0.003)

    server = Server()
    server.timer.add("forward", 5.0)  # before the timed calls: not theirs
    step = (np.arange(2), np.zeros((2, 1), np.uint8), np.zeros(2, np.float32), np.zeros(2, bool))
    _, ops = bench.time_calls(server, step, 4)
    assert ops == pytest.approx({"h2d_transfer": 0.001, "forward": 0.003})
    parts = bench.step_parts([ops, {"h2d_transfer": 0.003, "forward": 0.005}], latency=0.010)
    assert parts == "forward 4.000, h2d_transfer 2.000, untimed 4.000"  # medians, ms per call; the rest untimed


def test_hot_path_benchmark_refuses_bad_arguments_and_modes_this_host_lacks_before_any_timing():
    for bad, said in (
        (["--repeats", "0"], "--repeats=0: allowed: an integer >= 1"),
        (["--actors", "4,x"], "--actors=4,x: allowed: comma-separated integers >= 1"),
        (["--updates", "-1"], "--updates=-1: allowed: an integer >= 0 (0 = no learner)"),
        (["hot_path.learner=compile"], "hot_path.learner=compile: allowed: overrides other than actors and hot_path"),
        (
            ["--modes", "eager,cuda_graphs", "device=cpu"],
            "hot_path.inference='cuda_graphs': allowed: one of eager, compile on this host's device (cpu)",
        ),
        (["--modes", "eager,fast", "device=cpu"], "hot_path.inference='fast': allowed: one of eager, compile"),
    ):
        out = pipeline("pipelines/bench_inference.py", *bad, timeout=120)
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr
