"""Optuna search: a real 4-trial study, resume to the total, FAIL on errors and NaN."""

import json
import math
import re
import signal
import sys
import time

import mlflow
import optuna
import psutil
import pytest

from rlbench.searches.parent import recommend
from rlbench.searches.space import objective_values
from tests.conftest import CARTPOLE_TINY, ROOT, main_in_process, rlbench_cli, runs, wait_until

TINY = [
    *CARTPOLE_TINY,
    "progress=log",
    "telemetry.rate_hz=2",
    "telemetry.cpu_tdp_w=50",
    "search.actors=[2,8]",
    "search.actor_threads=[1,1]",
    "search.sm_limit=[1,2]",
]


def _search(store, tmp_path, n, *extra, timeout=600, base=TINY, command=None):
    """The search as a new process, or through `command` (the rlbench_main fixture: in-process)."""
    storage = f"search.storage=sqlite:///{tmp_path}/optuna.db"
    args = ["-m", "search=ratio", f"search.n_trials={n}", storage, *base, *extra, *store["overrides"]]
    return command(args) if command else rlbench_cli(args, timeout=timeout)


def _study(tmp_path):
    return optuna.load_study(study_name="ratio", storage=f"sqlite:///{tmp_path}/optuna.db")


def _states(study):
    return sorted(t.state.name for t in study.trials)


@pytest.mark.e2e
def test_study_of_four_trials_completes_with_runs_and_best(store, tmp_path):
    """With its defaults, on a host that measures no energy (CI: no NVML, no RAPL, no estimate):
    the task's time is the one objective, and the terminal says why energy was left out."""
    out = _search(store, tmp_path, 4, base=[o for o in TINY if not o.startswith("telemetry.cpu_tdp_w")])
    assert out.returncode == 0, out.stderr[-3000:]
    assert "objective runtime_s (minimise) only: energy_per_task_j left out: no energy can be measured" in out.stdout
    assert "ExperimentalWarning" not in out.stderr and "PedAnovaImportanceEvaluator" not in out.stderr
    study = _study(tmp_path)
    assert _states(study) == ["COMPLETE"] * 4 and study.directions == [optuna.study.StudyDirection.MINIMIZE]
    all_runs = runs(store["uri"])
    (parent,) = [r for r in all_runs if r.data.tags.get("rlbench.role") == "study"]
    kids = [r for r in all_runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(kids) == 4 and all(k.data.tags["optuna_study"] == "ratio" for k in kids)
    assert sorted(k.data.tags["optuna_trial"] for k in kids) == ["0", "1", "2", "3"]
    assert parent.info.status == "FINISHED" and "best_actors" in parent.data.tags
    assert parent.data.tags["objectives"] == "runtime_s (minimize)"
    assert "best_runtime_s" in parent.data.metrics
    # the recommendation by the command line's names, as the trial ran (a gym job: the threads asked)
    best = next(k for k in kids if k.data.tags["optuna_trial"] == parent.data.tags["best_trial"])
    knobs = f"actors={best.data.params['actors']} actor_threads=1 sm_limit={int(best.data.metrics['sm_granted'])}"
    assert (
        f"\nrecommended: {knobs} " in out.stdout
        and f"\n\nrecommended: `{knobs}`" in parent.data.tags["mlflow.note.content"]
    )
    assert parent.data.tags["best_set"].split("; ")[0] == best.info.run_name  # ran as asked: named as its run
    # each trial's run tagged with its verdict (one run each: floor unknown), a column of the search's view
    assert best.data.tags["verdict"].startswith("best; noise floor unknown")
    assert all(
        re.match(r"[\d.]+(%|x) slower than best; noise floor unknown", k.data.tags["verdict"])
        for k in kids
        if k != best
    )
    exp = mlflow.get_experiment(parent.info.experiment_id)
    view = json.loads(exp.tags[f"mlflow.sharedViewState.rlbench-{parent.info.run_id}"])
    assert next(c for c in view["selectedColumns"] if c.startswith("tags.")) == "tags.`verdict`"
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(parent.info.run_id)}
    assert {"trials.csv", "optimisation_history.png"} <= arts and "pareto_front.png" not in arts  # one objective


def test_an_objective_the_job_cannot_produce_is_refused_before_the_first_trial(store, tmp_path, rlbench_main):
    """learner=false logs no learner_updates_per_s: every trial would FAIL; refused instead, naming it."""
    out = _search(
        store,
        tmp_path,
        1,
        "search.objectives=[fps,learner_updates_per_s]",
        "search.directions=[maximize,maximize]",
        "learner=false",
        command=rlbench_main,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert (
        "'learner_updates_per_s' cannot be produced by this job on this host: learner=false runs no learner"
        in out.stderr
    )
    assert not (tmp_path / "optuna.db").exists() and runs(store["uri"]) == []


@pytest.mark.e2e
def test_failing_trials_are_fail_and_the_study_completes(store, tmp_path):
    # a job that raises (time limit) is FAIL
    out = _search(
        store,
        tmp_path,
        1,
        "search.objectives=[fps]",
        "search.directions=[maximize]",
        "search.study=second",
        "workload.max_runtime_s=0.001",
        "search.max_failures=1",
        command=main_in_process,
    )
    assert out.returncode == 1, out.stderr[-2000:]  # a search stopped by its failures (docs/usage.md)
    out = _search(
        store,
        tmp_path,
        2,
        "search.objectives=[fps]",
        "search.directions=[maximize]",
        "search.study=second",
        command=main_in_process,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    second = optuna.load_study(study_name="second", storage=f"sqlite:///{tmp_path}/optuna.db")
    assert _states(second) == ["COMPLETE", "COMPLETE", "FAIL"]


@pytest.mark.e2e
def test_kill_and_rerun_resumes_to_the_total(store, tmp_path):
    heartbeat_s = 1
    args = [
        "-m",
        "search=ratio",
        "search.n_trials=3",
        f"search.storage=sqlite:///{tmp_path}/optuna.db",
        f"search.heartbeat_s={heartbeat_s}",
        *TINY,
        *store["overrides"],
    ]
    proc = psutil.Popen([sys.executable, "-m", "rlbench", *args, "workload.frames=400000000"], cwd=ROOT)
    progress = re.compile(r"\bframes \d+/\d+")  # the job's progress line, as rlbench.core.progress logs it

    def mid_trial() -> bool:
        """The first trial's job logs progress (its Hydra log, not the study DB, which may be migrating)."""
        if any(progress.search(log.read_text()) for log in (tmp_path / "multirun").rglob("__main__.log")):
            return True
        assert proc.poll() is None, f"the search exited ({proc.returncode}) before its first trial's job ran"
        return False

    try:
        wait_until(mid_trial, 120, "the first trial's job logging progress", poll_s=0.5)
        proc.send_signal(signal.SIGKILL)  # a worker dies mid-trial: no chance to clean up
        proc.wait(timeout=30)
    finally:
        if proc.is_running():
            proc.kill()
    assert _states(_study(tmp_path)) == ["RUNNING"]
    # Not synchronisation: the dead worker's last heartbeat must age past optuna's grace period
    # (3 heartbeats, wall-clock time as the storage measures it; optuna has no clock to inject).
    time.sleep(3 * heartbeat_s + 1)
    out = rlbench_cli(args, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "energy_per_task_j (estimate)=" in out.stdout  # telemetry.cpu_tdp_w: a second objective, labelled
    states = _states(_study(tmp_path))
    assert states.count("COMPLETE") == 3 and states.count("FAIL") == 1


def test_out_of_range_space_is_refused_before_the_first_trial(store, tmp_path, rlbench_main):
    out = _search(store, tmp_path, 2, "search.actor_threads=[1,64]", command=rlbench_main)
    assert out.returncode == 2 and "search.actor_threads=[1, 64]" in out.stderr
    out = _search(store, tmp_path, 2, "search.workers=4", command=rlbench_main)
    assert out.returncode == 2 and "SQLite" in out.stderr
    assert runs(store["uri"]) == []


def test_objective_values_and_recommendation():
    assert objective_values({"fps": 10.0, "e": 2.0}, ["fps", "e"]) == [10.0, 2.0]
    assert objective_values({"fps": math.nan}, ["fps"]) is None
    assert objective_values({"fps": 1.0}, ["fps", "e"]) is None
    assert objective_values(None, ["fps"]) is None
    T = type("T", (), {})
    pts = []
    for n, v in enumerate([(100.0, 50.0), (90.0, 10.0), (10.0, 1.0)]):
        t = T()
        t.number, t.values = n, v
        pts.append(t)
    assert recommend(pts, ["maximize", "minimize"]).number == 1  # the balanced point


def test_the_pruner_prunes_a_dominated_trial():
    from rlbench.core.signals import JobPruned
    from rlbench.searches.trials import Pruner

    class FakeTrial:
        def __init__(self, threshold):
            self.reports, self.threshold = [], threshold

        def report(self, value, step):
            self.reports.append((step, value))

        def should_prune(self):
            return self.reports[-1][1] < self.threshold

    trial = FakeTrial(threshold=100.0)
    pruner = Pruner(trial)
    pruner.tick({"window/fps": 150.0}, 1000)
    pruner.tick({"window/fps": math.nan}, 2000)  # not reported
    pruner.tick({}, 3000)
    with pytest.raises(JobPruned, match="window/fps 50 at 4000 s"):
        pruner.tick({"window/fps": 50.0}, 4000)
    assert trial.reports == [(1000, 150.0), (4000, 50.0)]


@pytest.mark.parametrize("pruning", [True, False])
def test_a_trials_first_job_gets_its_pruner_as_an_observer_and_the_launcher_is_not_patched(pruning):
    from rlbench.config.schema import SearchConfig
    from rlbench.prepare.job import handed
    from rlbench.searches.trials import Pruner, launch_repeats

    class Launcher:  # like Hydra's BasicLauncher: runs its task function in this process
        def __init__(self, task_function):
            self.task_function, self.seen = task_function, []

        def launch(self, jobs, initial_job_idx):
            self.seen += [handed(job)[1] for job in jobs]
            return [self.task_function(job) for job in jobs]

    def task(job):
        return job

    launcher = Launcher(task)
    trial = type("T", (), {"number": 2})()
    assert launch_repeats(launcher, trial, SearchConfig(pruning=pruning), [["seed=1"], ["seed=2"]]) == [
        ["seed=1"],
        ["seed=2"],
    ]
    first, second = launcher.seen
    if pruning:
        assert len(first) == 1 and isinstance(first[0], Pruner) and first[0].trial is trial
    else:
        assert first == ()
    assert second == ()  # a second repeat would report the same steps again
    assert launcher.task_function is task and handed(["seed=1"]) == (None, ())  # nothing left behind


@pytest.mark.e2e
def test_pruning_study_counts_only_complete_trials(store, tmp_path):
    out = _search(
        store,
        tmp_path,
        3,
        "search.objectives=[fps]",
        "search.directions=[maximize]",
        "search.pruning=true",
        "search.pruner_startup_trials=1",
        "workload.frames=6000",
        command=main_in_process,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    states = _states(_study(tmp_path))
    assert states.count("COMPLETE") == 3 and "FAIL" not in states
    killed = [r for r in runs(store["uri"]) if r.info.status == "KILLED"]
    assert len(killed) == states.count("PRUNED")  # a pruned trial's run ends KILLED, never FINISHED
    # the pruner observed the trials' jobs through Hydra's launcher (prepare/job.py handing): their fps each tick
    assert any(t.intermediate_values for t in _study(tmp_path).trials), "no trial's job reported to its pruner"
    out = _search(store, tmp_path, 3, "search.pruning=true", command=main_in_process)  # two objectives
    assert out.returncode == 2 and "needs one objective" in out.stderr
