"""The search's decisions with a fake tracking port, fake jobs and Optuna's in-memory storage
(no MLflow store, no training): what a trial's job is given, how its outcome is told to the
study, when the search stops, what the study's parent records and how it ends."""

from __future__ import annotations

import math
from types import SimpleNamespace

import optuna
import pytest
from hydra.core.utils import JobReturn, JobStatus

from rlbench.config.schema import SearchConfig, TrackingConfig
from rlbench.core.signals import JobPruned
from rlbench.searches.parent import study_params, study_parent
from rlbench.searches.run import run_study
from rlbench.searches.space import SearchError
from rlbench.searches.trials import run_trials, trial_overrides
from rlbench.searches.warm_start import record
from tests.conftest import plain_table
from tests.tracking_fake import FakeExperiment, FakeParent

URI = "file:///nowhere"
JOB = ["env=cartpole"]


class BeatingStorage(optuna.storages.InMemoryStorage):
    """Optuna's in-memory storage, taking the heartbeats rlbench records (an RDB storage's job)."""

    def __init__(self):
        super().__init__()
        self.beats: list[int] = []

    def record_heartbeat(self, trial_id: int) -> None:
        self.beats.append(trial_id)


class Lock:
    """The study lock's offer (rlbench.searches.study.StudyLock), counting its uses."""

    def __init__(self):
        self.entered, self.closed = 0, False

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def space(**kw) -> SearchConfig:
    return SearchConfig(
        **{
            "n_trials": 3,
            "objectives": ["fps"],
            "directions": ["maximize"],
            "actors": [2, 16],
            "actor_threads": [1, 1],
            "sm_limit": [1, 2],
            "heartbeat_s": 1,
            "max_failures": 2,
        }
        | kw
    )


def new_study(s: SearchConfig) -> optuna.Study:
    return optuna.create_study(study_name=s.study, storage=BeatingStorage(), directions=list(s.directions))


def knob(overrides: list[str], key: str) -> int:
    return int(next(o for o in overrides if o.startswith(f"{key}=")).split("=")[1])


class Launcher:
    """A trial's job: 100 fps per actor, unless `outcome(overrides)` says otherwise (a JobReturn,
    or an exception it raises)."""

    def __init__(self, outcome=None):
        self.outcome, self.launched = outcome, []

    def launch(self, job_overrides, initial_job_idx):
        (overrides,) = job_overrides
        self.launched.append(overrides)
        got = self.outcome(overrides) if self.outcome else None
        if isinstance(got, BaseException):
            raise got
        return [
            got
            or JobReturn(
                status=JobStatus.COMPLETED,
                _return_value={
                    "fps": 100.0 * knob(overrides, "actors"),
                    "cpu_gpu_ratio": 0.5,
                    "run_id": f"run-{len(self.launched)}",
                    "actor_threads_used": knob(overrides, "actor_threads"),
                    "sm_granted": knob(overrides, "sm_limit"),
                    "compute_unit": "sm",
                },
            )
        ]


def failed(overrides):
    return JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("boom"))


def study_run(launcher, s, parent=None, experiment=None, study=None):
    """run_study with the fakes; returns (study, parent, lock)."""
    experiment = (experiment or FakeExperiment()).open(TrackingConfig(uri=URI, experiment="test"))
    study, parent, lock = study or new_study(s), parent or FakeParent(name="study ratio"), Lock()
    try:
        run_study(launcher, study, s, JOB, experiment, parent, lock)
    finally:
        assert lock.closed
    return study, parent, lock


def test_a_trials_job_is_told_its_knobs_parent_store_and_study():
    assert trial_overrides(JOB, {"actors": 8, "sm_limit": 2}, "ratio", 4, "p1", URI) == [
        "env=cartpole",
        "actors=8",
        "sm_limit=2",
        f"tracking.uri='{URI}'",
        "tracking.parent_run_id=p1",
        "tracking.run_name='trial 4: actors=8 sm_limit=2'",
        "+tracking.tags.optuna_study=ratio",
        "+tracking.tags.optuna_trial=4",
    ]


def test_trials_run_until_n_trials_are_complete_each_told_its_jobs_objective():
    s, launcher, lock = space(), Launcher(), Lock()
    study = new_study(s)
    run_trials(launcher, study, s, JOB, "p1", lock, URI)
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 and len(launcher.launched) == 3
    assert [t.values for t in trials] == [[100.0 * t.params["actors"]] for t in trials]
    assert [t.user_attrs["run_id"] for t in trials] == ["run-1", "run-2", "run-3"]
    assert [knob(o, "+tracking.tags.optuna_trial") for o in launcher.launched] == [0, 1, 2]
    assert all(knob(o, "actors") == t.params["actors"] for o, t in zip(launcher.launched, trials, strict=True))
    assert set(study._storage.beats) == {t._trial_id for t in trials}  # each heartbeat while it ran
    assert lock.entered == 4  # every claim under the lock, the last one finding the study done


def test_failed_jobs_and_missing_objectives_are_failed_trials_and_enough_stop_the_search():
    nan = JobReturn(status=JobStatus.COMPLETED, _return_value={"fps": math.nan})
    outcomes = iter([failed, lambda o: nan])
    s = space(max_failures=2)
    study = new_study(s)
    with pytest.raises(SearchError, match=r"2 trials failed in this run \(search.max_failures=2\)"):
        run_trials(Launcher(lambda o: next(outcomes)(o)), study, s, JOB, "p1", Lock(), URI)
    assert [t.state.name for t in study.trials] == ["FAIL", "FAIL"]
    assert study.trials[0].user_attrs["fail_reason"] == "boom"
    assert study.trials[1].user_attrs["fail_reason"] == "objective ['fps'] missing or not finite"


def test_a_pruned_job_is_a_pruned_trial_not_a_failure():
    outcomes = iter([JobPruned("window/fps 5 at 10 s is below the pruner's threshold")])
    s = space(n_trials=2, max_failures=1)
    study = new_study(s)
    run_trials(Launcher(lambda o: next(outcomes, None)), study, s, JOB, "p1", Lock(), URI)
    assert [t.state.name for t in study.trials] == ["PRUNED", "COMPLETE", "COMPLETE"]


def test_the_study_parent_ends_finished_with_the_recommendation_and_the_trials():
    parent = FakeParent(name="study ratio", tags={"warm_start_note": "warm start: 2 trial(s) enqueued"})
    experiment = FakeExperiment()
    study, parent, _ = study_run(Launcher(), space(n_trials=2), parent, experiment)
    best = study.best_trial
    assert parent.statuses == ["FINISHED"] and "trials.csv" in parent.files
    assert parent.tags()["best_actors"] == str(best.params["actors"]) and parent.tags()["best_trial"] == str(
        best.number
    )
    assert parent.metrics == {"best_fps": 100.0 * best.params["actors"]}
    lines = plain_table(parent.note).splitlines()
    head, links = lines[0].split(" · [Jobs table](")
    assert head == "**rlbench search** study `ratio` · 2 complete trials"
    # on its first line, as a sweep's parent: its links (above MLflow's fade), then the
    # recommendation and a row per trial linked to its run, numbers to 4 digits
    assert links.startswith("#/experiments/7/runs?viewStateShareKey=rlbench-" + "p" * 32)
    # one objective: the history plot, named so; no Pareto front
    assert "[Optimisation history](#/experiments/7/runs/" + "p" * 32 + "/artifactPath/optimisation_history.png" in links
    assert "Pareto" not in links and "optimisation_history.png" in parent.files
    assert lines[1:3] == [
        "",
        f"recommended: `actors={best.params['actors']}" + lines[2].split(str(best.params["actors"]), 1)[1],
    ]
    table = lines.index("| job | runtime_s | task_fps | fps | energy_per_task_j | cpu_gpu_ratio | bound |")
    assert table > 2
    for t in study.trials:  # as they ran, which here is as asked: the run's own name
        knobs = f"actors={t.params['actors']} actor_threads={t.params['actor_threads']} sm_limit={t.params['sm_limit']}"
        row = (
            f"| [trial {t.number}: "
            f"{knobs}](#/experiments/7/runs/{t.user_attrs['run_id']}?workflowType=machine_learning)"
            f" | not measured | not measured | {100.0 * t.params['actors']:.4g} | not measured | 0.5 |  |"
        )
        assert row in lines, (row, lines)
    assert parent.note.endswith("\n\nwarm start: 2 trial(s) enqueued")
    assert f"\n\nrecommended: `actors={best.params['actors']} actor_threads=1 sm_limit=" in parent.note
    assert "```" not in parent.note  # lines that wrap, not a block MLflow cuts at its right edge
    assert experiment.views == [
        (
            parent.run_id,
            ["actors", "actor_threads", "sm_limit"],
            {"runtime_s", "task_fps", "fps", "actor_threads_used", "sm_granted", "cpu_gpu_ratio"},
            None,
            ("verdict",),  # each trial's verdict as a column, as a sweep's view has it
        )
    ]
    assert set(experiment.run_tags) == {t.user_attrs["run_id"] for t in study.trials}
    assert experiment.run_tags[best.user_attrs["run_id"]] == {"verdict": "best; noise floor unknown"}


def test_a_later_run_of_the_search_updates_the_verdict_on_an_earlier_trials_runs():
    """The search resumes and adds a faster trial: the runs of the trial that was best before are
    tagged again, judged over every COMPLETE trial of the study (one run each: floor unknown)."""
    s, launcher, experiment = space(n_trials=2), Launcher(), FakeExperiment()
    study = new_study(s)
    for actors in (2, 4):
        study.enqueue_trial({"actors": actors, "actor_threads": 1, "sm_limit": 1})
    study_run(launcher, s, experiment=experiment, study=study)
    assert experiment.run_tags == {
        "run-1": {"verdict": "2.00x slower than best; noise floor unknown"},  # 200 fps against 400
        "run-2": {"verdict": "best; noise floor unknown"},
    }
    study.enqueue_trial({"actors": 16, "actor_threads": 1, "sm_limit": 1})
    study_run(launcher, space(n_trials=3), experiment=experiment, study=study)
    assert {run: tags["verdict"].split(";")[0] for run, tags in experiment.run_tags.items()} == {
        "run-1": "8.00x slower than best",  # 200 fps against 1600
        "run-2": "4.00x slower than best",
        "run-3": "best",
    }
    failed_trial = study.ask()  # a trial that is not COMPLETE has no verdict and no run to tag
    study.tell(failed_trial, state=optuna.trial.TrialState.FAIL)
    study_run(launcher, space(n_trials=3), experiment=experiment, study=study)
    assert set(experiment.run_tags) == {"run-1", "run-2", "run-3"}


def test_the_study_parent_ends_failed_with_the_trials_when_too_many_fail(capsys):
    parent = FakeParent()
    with pytest.raises(SearchError):
        study_run(Launcher(failed), space(max_failures=1), parent)
    assert parent.statuses == ["FAILED"] and parent.files == ["trials.csv"] and "best_trial" not in parent.tags()
    assert f"parent run {parent.run_id} FAILED\nno COMPLETE trial yet" in capsys.readouterr().out


def test_ctrl_c_fails_the_running_trial_and_kills_the_study_parent():
    s, parent = space(), FakeParent()
    study = new_study(s)
    with pytest.raises(KeyboardInterrupt):
        study_run(Launcher(lambda o: KeyboardInterrupt()), s, parent, study=study)
    assert [t.state.name for t in study.trials] == ["FAIL"]
    assert parent.statuses == ["KILLED"] and parent.files == ["trials.csv"]


def test_a_resumed_study_reopens_its_parent_and_a_new_one_opens_one():
    found = FakeParent(name="study ratio")
    assert study_parent(FakeExperiment(found={"ratio": found}), "ratio") is found and found.statuses == ["RUNNING"]
    experiment = FakeExperiment()
    opened = study_parent(experiment, "ratio")
    assert experiment.opened == [("search", opened)] and opened.name == "study ratio"
    assert opened.tags() == {"rlbench.role": "study", "optuna_study": "ratio"} and opened.statuses == []
    named = study_parent(FakeExperiment(), "ratio", "CartPole-v1 r2d2")  # the env and algorithm it runs
    assert named.name == "study ratio CartPole-v1 r2d2"


def test_a_new_study_parent_records_what_it_searches_as_its_parameters():
    """Not "Parameters (0)": the line each trial runs, the trials, the space and the seed; a
    resumed parent keeps those it was opened with (MLflow's params cannot change)."""
    from rlbench.config.schema import SearchConfig

    s = SearchConfig(n_trials=5, actors=[2, 8], seed=3)
    params = study_params(s, ["env=cartpole", "workload=smoke"])
    opened = study_parent(FakeExperiment(), "ratio", "CartPole-v1 r2d2", params)
    assert opened.params == {
        "job": "env=cartpole workload=smoke",
        "n_trials": 5,
        "sampler_seed": 3,
        "space": "actors=[2, 8] actor_threads=[1, 2] sm_limit=[1, 2]",
    }
    found = FakeParent(name="study ratio")
    assert study_parent(FakeExperiment(found={"ratio": found}), "ratio", "", params).params == {}


def test_the_warm_start_is_recorded_on_the_parent():
    s = space(warm_start_profile="prof1", objectives=["fps", "energy_per_task_j"], directions=["maximize", "minimize"])
    machine = SimpleNamespace(names=lambda: "profile prof1")
    rows = [{"trial": 0, "actors": 4, "predicted_fps": 900.0}, {"trial": 1, "actors": 8, "predicted_fps": 800.0}]
    parent = FakeParent()
    record(parent, s, machine, rows, ["energy_per_task_j"])
    assert parent.tags()["warm_start_profile"] == "prof1"
    assert parent.tags()["warm_start_note"] == (
        "warm start: 2 trial(s) enqueued from profile prof1; ranked by fps; "
        "not predictable, left out of the ranking: energy_per_task_j"
    )
    assert parent.tables == {
        "warm_start/predictions.json": {"trial": [0, 1], "actors": [4, 8], "predicted_fps": [900.0, 800.0]}
    }


def test_only_optunas_experimental_importance_and_slice_warnings_are_kept_off_inside_the_searchs_calls():
    import warnings

    from rlbench.searches.study import quiet_optuna

    cases = [
        (optuna.exceptions.ExperimentalWarning, "Argument ``heartbeat_interval`` is an experimental feature"),
        (UserWarning, "PedAnovaImportanceEvaluator computes the importances of params to achieve low `target`"),
        (UserWarning, "Attempting to set identical low and high xlims makes transformation singular"),
        (UserWarning, "Heartbeat of storage is supposed to be used with Study.optimize."),
        (UserWarning, "something else"),
        (FutureWarning, "a future change"),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_optuna():
            for category, text in cases:
                warnings.warn(text, category, stacklevel=1)
        warnings.warn("outside", optuna.exceptions.ExperimentalWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else", "a future change", "outside"]


def test_a_trial_whose_worker_is_known_gone_is_failed_and_retried_at_once():
    """Its run was just closed KILLED (the owner process is gone): no wait for the heartbeat's
    grace period; the retry is queued with the same params, as the stale-trial callback does."""
    from rlbench.searches.study import fail_gone_trials

    s = space(retries=1)
    study = new_study(s)
    gone = study.ask({"actors": optuna.distributions.IntDistribution(2, 16)})
    alive = study.ask({"actors": optuna.distributions.IntDistribution(2, 16)})
    experiment = FakeExperiment(gone={"run-a": ("ratio", gone.number), "run-b": ("other", alive.number)})
    numbers = experiment.trial_numbers(experiment.mark_stale_runs(), s.study)
    assert numbers == {gone.number}  # a trial of another study with the same number is not this one's
    assert fail_gone_trials(study, numbers, s.retries) == 1
    states = {t.number: t.state.name for t in study.trials}
    assert states[gone.number] == "FAIL" and states[alive.number] == "RUNNING"
    (retry,) = [t for t in study.trials if t.state.name == "WAITING"]
    assert retry.params == study.trials[gone.number].params
    assert fail_gone_trials(study, numbers, s.retries) == 0  # already failed: nothing twice


def test_the_stores_filter_takes_this_studys_trials_only(monkeypatch):
    """rlbench/tracking/readers.py's trial_numbers over runs as the store gives them: another
    study's trial 3 and a run without a trial number are not this study's."""
    from rlbench.tracking import readers

    tags = {
        "a": {"optuna_study": "ratio", "optuna_trial": "2"},
        "b": {"optuna_study": "other", "optuna_trial": "3"},
        "c": {"optuna_study": "ratio"},
        "d": {"optuna_trial": "5"},
    }
    monkeypatch.setattr(
        readers, "read_run", lambda run_id: readers.RunRecord(run_id, "", "1", "KILLED", tags=tags[run_id])
    )
    assert readers.trial_numbers(list(tags), "ratio") == {2}
    assert readers.trial_numbers(list(tags), "other") == {3}


def test_opening_the_study_claiming_and_failing_a_trial_warn_nothing(tmp_path):
    """The installed Optuna's own storage (sqlite, heartbeats on): no deprecation, experimental or
    heartbeat warning reaches the terminal (each Optuna release renames something here)."""
    import warnings

    from rlbench.searches.study import claim_trial, fail_gone_trials, open_study

    s = space(storage=f"sqlite:///{tmp_path}/study.db", retries=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = open_study(s)
        trial, _ = claim_trial(study, s, Lock())
        assert fail_gone_trials(study, {trial.number}, s.retries) == 1
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []


def test_a_search_without_objectives_runs_with_the_defaults_for_this_host(store, tmp_path, rlbench_main, monkeypatch):
    """The command's wiring (rlbench/searches/run.py run_search) to default_objectives: no
    `search.objectives` given, the study and its parent get this host's defaults (no meter in
    this test: the task's time alone, energy left out with its reason). The trials are not run."""
    from rlbench.searches import run as search
    from rlbench.searches.space import Meters

    meters = Meters("no NVML in this test", "no RAPL in this test", "no RAPL in this test", ())
    seen = {}

    def no_trials(launcher, study, s, job, experiment, parent, lock, labels=None, **kw):
        seen.update(
            objectives=list(s.objectives),
            directions=list(s.directions),
            study=study.directions,
            tag=parent.tags()["objectives"],
        )
        lock.close()
        return "FINISHED"

    monkeypatch.setattr(search, "host_meters", lambda: meters)
    monkeypatch.setattr(search, "run_study", no_trials)
    out = rlbench_main(
        [
            "-m",
            "search=ratio",
            "search.n_trials=1",
            f"search.storage=sqlite:///{tmp_path}/optuna.db",
            "env=cartpole",
            "algo=random",
            "workload=smoke",
            *store["overrides"],
        ]
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert seen["objectives"] == ["runtime_s"] and seen["directions"] == ["minimize"]
    assert [d.name for d in seen["study"]] == ["MINIMIZE"] and seen["tag"] == "runtime_s (minimize)"
    assert "energy_per_task_j" in out.stdout  # the line naming the objective left out, and why


def _shown(axis) -> list[str]:
    """The major tick labels a matplotlib axis draws inside its range."""
    lo, hi = sorted(axis.get_view_interval())
    locs, labels = axis.get_majorticklocs(), axis.get_majorticklabels()
    return [t.get_text() for x, t in zip(locs, labels, strict=True) if lo <= x <= hi and t.get_text()]


@pytest.mark.parametrize("actors, ticks", [((3, 4, 3), {"3", "4"}), ((5, 6, 8, 29), {"5", "10", "20"})])
def test_the_searchs_figures_tick_knobs_and_trials_at_integers(actors, ticks):
    """The slice plot's knobs (actors on a log axis: 3 to 4 drew no label, 5 to 29 only 10^1) and
    the trials' numbers (the history's axis, the colour bar: no trial 0.5) as integers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as ovm

    from rlbench.searches.parent import log_steps, readable
    from rlbench.searches.study import quiet_optuna

    assert log_steps(5, 29) == [5, 10, 20] and log_steps(2.95, 4.05) == []  # the actors' axis: log or integers

    dist = {
        "actors": optuna.distributions.IntDistribution(2, 32, log=True),
        "actor_threads": optuna.distributions.IntDistribution(1, 1),
        "sm_limit": optuna.distributions.IntDistribution(1, 2),
    }
    study = optuna.create_study()
    for n, a in enumerate(actors):
        study.add_trial(
            optuna.trial.create_trial(
                params={"actors": a, "actor_threads": 1, "sm_limit": 1 + n % 2}, distributions=dist, value=1.0 / a
            )
        )
    try:
        with quiet_optuna():
            ovm.plot_slice(study)
        fig = plt.gcf()
        readable(fig)
        fig.canvas.draw()
        axes = {ax.get_xlabel(): ax for ax in fig.axes if ax.get_label() != "<colorbar>"}
        (bar,) = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
        assert set(_shown(axes["actors"].xaxis)) == ticks
        assert _shown(axes["sm_limit"].xaxis) == ["1", "2"] and _shown(axes["actor_threads"].xaxis) == ["1"]
        assert all(t.isdigit() for t in _shown(bar.yaxis)), _shown(bar.yaxis)
        plt.close("all")
        with quiet_optuna():
            ovm.plot_optimization_history(study)
        fig = plt.gcf()
        readable(fig)
        fig.canvas.draw()
        assert _shown(fig.axes[0].xaxis) == [str(n) for n in range(len(actors))]
    finally:
        plt.close("all")


def test_a_searchs_plots_leave_matplotlibs_style_as_it_was(tmp_path):
    """Optuna's matplotlib plots set the ggplot style for the whole process (grey panels, larger
    labels); drawn in an rc_context, they leave it as it was, so a report drawn after a search in
    one process keeps its own (its packing figure's long y labels ran past its edge in ggplot's)."""
    import matplotlib

    from rlbench.searches.parent import plots

    matplotlib.rcdefaults()
    study = optuna.create_study()
    study.optimize(lambda t: t.suggest_float("x", 1.0, 2.0), n_trials=3)
    parent = FakeParent()
    plots(study, ["runtime_s"], tmp_path, parent)
    assert "optimisation_history.png" in parent.files  # drawn in Optuna's style
    assert (matplotlib.rcParams["axes.facecolor"], matplotlib.rcParams["axes.labelsize"]) == ("white", "medium")
