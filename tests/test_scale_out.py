"""Beyond one machine, with real servers on loopback: a PostgreSQL and an `mlflow server`
(backend store in that PostgreSQL, proxied artifacts), started once per session.

- a 4-job sweep through submitit's local executor (as SLURM runs jobs) logs to the server;
- the SLURM launcher hands sbatch an array with the configured resources (sbatch stubbed);
- 2 search workers on one PostgreSQL study complete exactly n_trials, none twice, none lost;
- a worker SIGKILLed mid-trial: its trial goes stale, is failed and retried once, the study completes;
- tracking server or study storage unreachable: preflight error naming the URL, exit 2, no job.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import mlflow
import optuna
import psutil
import pytest

from rlbench.prepare.preflight import PreflightError, check, masked
from tests.conftest import CARTPOLE_TINY, ROOT, main_in_process, rlbench_cli, runs, wait_until
from tests.servers import PG_PASSWORD, free_port

# The tiniest real jobs. One intra-op thread each (sm_limit=1): several jobs share this host's
# cores at once, and oversubscribed torch threads would make each take minutes, not seconds.
TINY = [*CARTPOLE_TINY, "actors=2", "sm_limit=1", "progress=log", "telemetry.rate_hz=2"]
SEARCH = [
    *(o for o in TINY if not o.startswith(("actors=", "sm_limit="))),
    "search=ratio",
    "search.objectives=[fps]",
    "search.directions=[maximize]",
    "search.actors=[2,8]",
    "search.actor_threads=[1,1]",
    "search.sm_limit=[1,1]",
    "search.workers=2",
]


def _children(all_runs, parent_id):
    return [r for r in all_runs if r.data.tags.get("mlflow.parentRunId") == parent_id]


def _by_role(all_runs, role):
    return [r for r in all_runs if r.data.tags.get("rlbench.role") == role]


@pytest.mark.e2e
@pytest.mark.integration
def test_submitit_sweep_logs_to_the_server_under_one_parent(server_store, mlflow_server):
    args = ["-m", "hydra/launcher=local_submitit", "seed=1,2,3,4", *TINY, *server_store["overrides"]]
    out = rlbench_cli(args, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    all_runs = runs(mlflow_server.url, server_store["experiment"])
    (parent,) = _by_role(all_runs, "sweep")
    kids = _children(all_runs, parent.info.run_id)
    assert sorted(k.info.run_name for k in kids) == ["seed=1", "seed=2", "seed=3", "seed=4"]
    assert all(k.info.status == "FINISHED" for k in kids) and parent.info.status == "FINISHED"
    assert len(all_runs) == 5
    # artifacts went through the server (proxied), into its --artifacts-destination
    assert kids[0].info.artifact_uri.startswith("mlflow-artifacts:")
    assert "config.yaml" in [a.path for a in mlflow.MlflowClient().list_artifacts(kids[0].info.run_id)]
    assert list(mlflow_server.artifacts.rglob("summary.csv")) and list(mlflow_server.artifacts.rglob("config.yaml"))
    # The report works unchanged against the server, and logs through it onto the parent.
    from rlbench.cli.report import main as report

    assert (
        report(
            [
                "--sweep",
                parent.info.run_id,
                "--tracking-uri",
                mlflow_server.url,
                "--out",
                str(mlflow_server.artifacts.parent / "report"),
            ]
        )
        == 0
    )
    assert "report/report.html" in [a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id, "report")]
    assert list(mlflow_server.artifacts.rglob("report.html"))


@pytest.mark.e2e
@pytest.mark.integration
def test_slurm_launcher_submits_an_array_with_the_configured_resources(store, tmp_path):
    """No cluster here: a stand-in `sbatch` keeps the script submitit hands it, then refuses."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sbatch").write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ -f "$a" ] && cp "$a" {tmp_path}/job.sh; done\n'
        'echo "sbatch: error: no cluster (test stand-in)" >&2\nexit 1\n'
    )
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    args = [
        "-m",
        "hydra/launcher=slurm",
        "experiment=actor_sweep",
        "hydra.launcher.partition=debug",
        "hydra.launcher.mem_gb=32",
        "hydra.launcher.timeout_min=30",
        "env=cartpole",
        "workload=smoke",
        *store["overrides"],
    ]
    out = main_in_process(args, extra_env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})  # submitit runs sbatch
    assert out.returncode == 1 and "no cluster (test stand-in)" in out.stderr, out.stderr[-2000:]  # a failed submission
    script = (tmp_path / "job.sh").read_text()
    for line in (
        "--array=0-7%8",
        "--partition=debug",
        "--cpus-per-task=16",
        "--gpus-per-node=1",
        "--mem=32GB",
        "--time=30",
        "--job-name=rlbench",
    ):
        assert f"#SBATCH {line}\n" in script, line
    (parent,) = _by_role(runs(store["uri"]), "sweep")  # nothing ran: the parent says so
    assert parent.info.status == "FAILED"


def _worker(args: list[str], log: Path) -> psutil.Popen:
    with open(log, "w") as f:
        return psutil.Popen(
            [sys.executable, "-m", "rlbench", *args],
            cwd=ROOT,
            stdout=f,
            stderr=f,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "1"},
        )


def _wait(procs: list[psutil.Popen], timeout: float) -> list[int]:
    try:
        return [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.is_running():
                _kill_tree(p)


def _wait_for(ready, proc: psutil.Popen, log: Path, timeout: float = 180) -> None:
    """Until ready(); fails (with the worker's log) if the worker exits or `timeout` passes first."""

    def ready_or_dead() -> bool:
        if ready():
            return True
        assert proc.poll() is None, f"the worker exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
        return False

    wait_until(ready_or_dead, timeout, lambda: log.read_text()[-3000:], poll_s=0.5)


def _kill_tree(proc: psutil.Popen) -> None:
    family = proc.children(recursive=True) + [proc]
    for p in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(family, timeout=30)


def _check_runs_match_trials(study, server_url: str, experiment: str) -> None:
    """One FINISHED run per COMPLETE trial, with that trial's params: no mix-up, none twice."""
    all_runs = runs(server_url, experiment)
    (parent,) = _by_role(all_runs, "study")
    kids = {r.info.run_id: r for r in _children(all_runs, parent.info.run_id)}
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert sorted(t.user_attrs["run_id"] for t in done) == sorted(
        rid for rid, r in kids.items() if r.info.status == "FINISHED"
    )
    for t in done:
        run = kids[t.user_attrs["run_id"]]
        assert run.data.tags["optuna_trial"] == str(t.number)
        assert {k: int(run.data.params[k]) for k in t.params} == t.params
    assert parent.info.status == "FINISHED"


@pytest.mark.e2e
@pytest.mark.integration
def test_two_search_workers_complete_exactly_n_trials(server_store, postgres, mlflow_server, tmp_path):
    storage = postgres.create_db("study_two_workers")
    args = [
        "-m",
        *SEARCH,
        "search.n_trials=4",
        f"search.storage={storage}",
        "search.heartbeat_s=2",
        *server_store["overrides"],
    ]
    logs = [tmp_path / "worker0.log", tmp_path / "worker1.log"]
    procs = [_worker(args + [f"hydra.sweep.dir={tmp_path}/w{i}"], logs[i]) for i in range(2)]
    codes = _wait(procs, timeout=400)
    texts = [log.read_text() for log in logs]
    assert codes == [0, 0], "\n----\n".join(t[-3000:] for t in texts)
    study = optuna.load_study(study_name="ratio", storage=storage)
    assert sorted(t.state.name for t in study.trials) == ["COMPLETE"] * 4
    assert sorted(t.number for t in study.trials) == [0, 1, 2, 3]
    assert all("[rlbench search] trial" in t for t in texts), "both workers ran trials"
    _check_runs_match_trials(study, mlflow_server.url, server_store["experiment"])


class _FakeLauncher:
    """A job that takes a random moment and sometimes fails: only the claiming logic is tested."""

    def __init__(self, seed: int):
        import random

        self.rng = random.Random(seed)

    def launch(self, overrides, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        time.sleep(
            self.rng.uniform(0.0, 0.2)
        )  # not synchronisation: the fake job's work, so workers' claims interleave
        if self.rng.random() < 0.2:
            return [JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("injected failure"))]
        return [JobReturn(status=JobStatus.COMPLETED, _return_value={"fps": self.rng.random(), "run_id": "r"})]


def _claiming_worker(storage: str, seed: int) -> None:
    from rlbench.config.schema import SearchConfig
    from rlbench.searches.study import StudyLock, open_study
    from rlbench.searches.trials import run_trials

    s = SearchConfig(
        storage=storage,
        n_trials=12,
        objectives=["fps"],
        directions=["maximize"],
        workers=4,
        heartbeat_s=1,
        max_failures=100,
        sm_limit=[1, 1],
    )
    lock = StudyLock(storage, s.study)
    with lock:
        study = open_study(s)
    run_trials(_FakeLauncher(seed), study, s, [], "parent", lock, "http://unused")


@pytest.mark.e2e
@pytest.mark.integration
def test_four_claiming_workers_stop_at_exactly_n_trials(postgres):
    """4 processes racing on one study, with failures: COMPLETE ends at n_trials, never above."""
    import multiprocessing

    storage = postgres.create_db("study_claims")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_claiming_worker, args=(storage, seed)) for seed in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    trials = optuna.load_study(study_name="ratio", storage=storage).trials
    states = [t.state.name for t in trials]
    assert states.count("COMPLETE") == 12 and set(states) <= {"COMPLETE", "FAIL"}
    assert sorted(t.number for t in trials) == list(range(len(trials)))


@pytest.mark.e2e
@pytest.mark.integration
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_worker_killed_mid_trial_is_retried_and_the_study_completes(server_store, postgres, mlflow_server, tmp_path):
    storage = postgres.create_db("study_killed_worker")
    args = [
        "-m",
        *SEARCH,
        "search.n_trials=2",
        f"search.storage={storage}",
        "search.heartbeat_s=1",
        *server_store["overrides"],
    ]
    # the victim's trial would run for hours: it is surely mid-trial when killed
    victim = _worker(
        args + [f"hydra.sweep.dir={tmp_path}/victim", "workload.frames=400000000"], tmp_path / "victim.log"
    )
    survivor = None
    try:
        _wait_for(
            lambda: "[rlbench search] trial" in (tmp_path / "victim.log").read_text(), victim, tmp_path / "victim.log"
        )
        # the victim holds one of the 2 slots: the survivor takes the other, then must wait for it
        survivor = _worker(args + [f"hydra.sweep.dir={tmp_path}/survivor"], tmp_path / "survivor.log")
        _wait_for(
            lambda: any("frames" in p.read_text() for p in (tmp_path / "victim").rglob("__main__.log")),
            victim,
            tmp_path / "victim.log",
        )
        _kill_tree(victim)  # mid-trial, no chance to clean up: its trial stays RUNNING, its heartbeat stops
        (code,) = _wait([survivor], timeout=300)
    finally:
        for p in (victim, survivor):
            if p is not None and p.is_running():
                _kill_tree(p)
    assert code == 0, (tmp_path / "survivor.log").read_text()[-3000:]
    study = optuna.load_study(study_name="ratio", storage=storage)
    states = sorted(t.state.name for t in study.trials)
    assert states == ["COMPLETE", "COMPLETE", "FAIL"]
    (failed,) = [t for t in study.trials if t.state.name == "FAIL"]
    retried = [
        t for t in study.trials if optuna.storages.RetryFailedTrialCallback.retried_trial_number(t) == failed.number
    ]
    assert len(retried) == 1 and retried[0].state.name == "COMPLETE" and retried[0].params == failed.params
    _check_runs_match_trials(study, mlflow_server.url, server_store["experiment"])


@pytest.mark.e2e
@pytest.mark.integration
def test_tracking_server_down_no_job_started(tmp_path):
    down = f"http://mlflow:pw-xyz@127.0.0.1:{free_port()}"  # nothing listens there
    common = [
        *TINY,
        f"tracking.uri={down}",
        "tracking.experiment=down",
        f"hydra.sweep.dir={tmp_path}/multirun",
        f"hydra.run.dir={tmp_path}/out",
    ]
    for args in (
        ["-m", "seed=1,2", *common],
        ["-m", *SEARCH[:-1], f"search.storage=sqlite:///{tmp_path}/o.db", *common],
        common,
    ):
        out = main_in_process(args)
        assert out.returncode == 2, out.stderr[-2000:]
        assert masked(down) in out.stderr and "not reachable" in out.stderr and "pw-xyz" not in out.stderr
        assert out.stderr.startswith(
            f"rlbench: tracking.uri={masked(down)}: MLflow tracking server not reachable: "
            "GET /health failed: [Errno 111] Connection refused; start it"
        )
    assert not (tmp_path / "multirun").exists()  # no Hydra job of the sweep or search began
    assert not (tmp_path / "o.db").exists() and not (tmp_path / "out").exists()  # the single run: refused before Hydra


@pytest.mark.e2e
@pytest.mark.integration
def test_study_storage_down_no_job_started(server_store, postgres, mlflow_server, tmp_path):
    storage = postgres.url("no_such_db")
    out = main_in_process(["-m", *SEARCH, f"search.storage={storage}", *server_store["overrides"]])
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        masked(storage) in out.stderr and PG_PASSWORD not in out.stderr and '"no_such_db" does not exist' in out.stderr
    )
    assert runs(mlflow_server.url, server_store["experiment"]) == []
    assert not (tmp_path / "multirun").exists()


def test_tracking_uri_precedence_command_line_then_env_then_preset(compose_cfg, monkeypatch):
    from rlbench.prepare.validate import validate
    from rlbench.tracking.store import artifact_location

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert validate(compose_cfg([])).tracking.uri == "sqlite:///mlruns/mlflow.db"
    server = validate(compose_cfg(["tracking=server"])).tracking
    assert server.uri == "http://127.0.0.1:5000" and artifact_location(server) is None
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://10.0.0.7:5000")
    for preset in ("local", "server"):
        tracking = validate(compose_cfg([f"tracking={preset}"])).tracking
        assert tracking.uri == "http://10.0.0.7:5000"
        assert artifact_location(tracking) is None  # mlruns/artifacts would exist on this host only: proxied
    assert validate(compose_cfg(["tracking.uri=sqlite:///x/m.db"])).tracking.uri == "sqlite:///x/m.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    with pytest.raises(Exception, match="tracking.uri='': allowed: an MLflow tracking URI"):
        validate(compose_cfg([]))


def test_preflight_names_the_url_masks_the_password_and_says_what_failed(tmp_path):
    assert masked("postgresql+psycopg2://bob:hunter2@db:5432/optuna") == "postgresql+psycopg2://bob:***@db:5432/optuna"
    assert masked("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    check(f"sqlite:///{tmp_path}/new/mlflow.db", f"sqlite:///{tmp_path}/new2/optuna.db")  # local: nothing to reach
    assert not (tmp_path / "new").exists()  # nor anything created: the stores make their folders
    port = free_port()
    with pytest.raises(PreflightError) as e:
        check(storage=f"postgresql+psycopg2://bob:hunter2@127.0.0.1:{port}/optuna")
    assert str(e.value).startswith(
        f"search.storage=postgresql+psycopg2://bob:***@127.0.0.1:{port}/optuna: "
        "an Optuna study storage not reachable: connect failed"
    )
    assert "hunter2" not in str(e.value)
    with pytest.raises(
        PreflightError,
        match=f"tracking.uri=http://127.0.0.1:{port}: MLflow tracking server not reachable: GET /health failed",
    ):
        check(f"http://127.0.0.1:{port}")


def test_several_workers_need_postgresql():
    from rlbench.config.schema import SearchConfig
    from rlbench.searches.space import check_space

    problems = check_space(SearchConfig(storage="mysql://u:pw@h/db", workers=3, sm_limit=[1, 1]), host_units=2)
    assert any("search.workers=3 with storage mysql://u:***@h/db: allowed: a PostgreSQL URL" in p for p in problems)
    assert not check_space(SearchConfig(storage="postgresql://u:pw@h/db", workers=3, sm_limit=[1, 1]), host_units=2)
