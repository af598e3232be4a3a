"""The sweep's decisions with a fake tracking port and fake jobs (no store, no training): what
every job is given, what the parent records, how failures, resume, repeats and Ctrl-C end it."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.utils import JobReturn, JobStatus

from rlbench.cli.command import exits
from rlbench.config.schema import TrackingConfig
from rlbench.sweeps.sweep import run_grid, sweep_key
from rlbench.tracking.experiment import Experiment
from rlbench.tracking.parent import ParentRun, live
from rlbench.tracking.readers import RunRecord
from rlbench.tracking.store import config_hash
from tests.tracking_fake import FakeExperiment, FakeParent

URI = "file:///nowhere"  # no preflight, and nothing would be found there: the fake is the store


@dataclass
class Conf:
    """What the sweep reads of a validated job config."""

    actors: int
    resume: bool = False
    tracking: TrackingConfig = field(default_factory=lambda: TrackingConfig(uri=URI, experiment="test"))


class JobFailed(RuntimeError):
    def __init__(self, text: str, run_id: str):
        super().__init__(text)
        self.run_id = run_id


def actors_of(overrides: list[str]) -> int:
    return int(next(o for o in overrides if o.startswith("actors=")).split("=")[1])


def outcome(overrides: list[str], fail: frozenset = frozenset()) -> JobReturn:
    """A job's return as Hydra gives it: a task of 100 / actors s at 10 x actors fps, or a failure."""
    a = actors_of(overrides)
    if a in fail:
        return JobReturn(status=JobStatus.FAILED, _return_value=JobFailed("boom", f"run-{a}"))
    return JobReturn(
        status=JobStatus.COMPLETED,
        _return_value={
            "runtime_s": 100.0 / a,
            "fps": 10.0 * a,
            "task_fps": 10.0 * a,
            "energy_per_task_j": None,
            "cpu_gpu_ratio": a / 2,
            "run_id": f"run-{a}",
            "bound": "the actors",
            "unmeasured": {"energy_per_task_j": "no RAPL"},
        },
    )


class Launcher:
    """Takes all jobs at once, like joblib's: `fail` holds the actor counts whose job fails."""

    def __init__(self, fail=()):
        self.fail, self.launched = frozenset(fail), []

    def launch(self, job_overrides, initial_job_idx):
        self.launched += job_overrides
        return [outcome(o, self.fail) for o in job_overrides]


class Basic(BasicLauncher):
    """One job at a time, like Hydra's basic launcher; Ctrl-C arrives during job `interrupt_at`."""

    def __init__(self, interrupt_at: int):
        super().__init__()
        self.interrupt_at, self.launched = interrupt_at, []

    def launch(self, job_overrides, initial_job_idx):
        self.launched += job_overrides
        if len(self.launched) > self.interrupt_at:
            raise KeyboardInterrupt
        return [outcome(o) for o in job_overrides]


def sweep(jobs, launcher, experiment=None, confs=None, grid=None):
    """run_grid with the fakes; returns (rows, the experiment, its one parent)."""
    experiment = experiment or FakeExperiment()
    sweeper = SimpleNamespace(
        launcher=launcher, config=SimpleNamespace(hydra=SimpleNamespace(runtime=SimpleNamespace(choices={})))
    )
    confs = confs or [Conf(actors_of(j)) for j in jobs]
    try:
        rows = run_grid(sweeper, ["actors=..."], jobs, confs, grid, store=experiment.open).rows
    finally:
        ((command, parent),) = experiment.opened
        assert command == "sweep" and parent.tags()["rlbench.role"] == "sweep"
    return rows, experiment, parent


def _parameters(function) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_fakes_offer_what_the_tracking_port_offers():
    for real, fake in ((ParentRun, FakeParent), (Experiment, FakeExperiment)):
        for name, method in inspect.getmembers(real, inspect.isfunction):
            if not name.startswith("_"):
                assert _parameters(getattr(fake, name)) == _parameters(method), f"{fake.__name__}.{name}"


def test_every_job_is_told_its_parent_name_and_store_and_the_parent_its_grid():
    launcher = Launcher()
    _, experiment, parent = sweep([["actors=2"], ["actors=4"]], launcher)
    assert launcher.launched[1] == [
        "actors=4",
        f"tracking.uri='{URI}'",
        "tracking.experiment='test'",
        f"tracking.parent_run_id={parent.run_id}",
        "tracking.run_name='actors=4'",
    ]
    assert parent.name == "sweep actors=2,4" and parent.params == {"grid": "actors=...", "jobs": 2, "repeats": 1}
    assert experiment.stale_marked == 1 and experiment.tracking.experiment == "test"


def test_a_finished_sweep_records_its_summary_best_and_note_and_ends_finished(capsys):
    rows, experiment, parent = sweep(
        [["actors=2"], ["actors=4"]], Launcher(), FakeExperiment(taken={"sweep actors=2,4"})
    )
    assert [r["status"] for r in rows] == ["FINISHED", "FINISHED"] and parent.statuses == ["FINISHED"]
    assert parent.name == "sweep actors=2,4 #2"  # another top-level run has the name
    summary = parent.tables["summary.json"]
    assert summary["runtime_s"] == [50.0, 25.0] and summary["run_id"] == ["run-2", "run-4"]
    assert parent.texts["summary.csv"].splitlines()[2].startswith("1,actors=4,actors=4,0,actors=4,FINISHED,25.0,40.0")
    assert parent.metrics == {
        "best/runtime_s": 25.0,
        "best/fps": 40.0,
        "best/cpu_gpu_ratio": 2.0,
        "jobs_finished": 2.0,
        "jobs_failed": 0.0,
    }  # energy: not measured, left out
    assert parent.note.startswith("**rlbench sweep** actors=2,4 #2 · FINISHED · 2 jobs: 2 finished")
    assert "Best (runtime_s): job 1 `actors=4`" in parent.note
    assert experiment.views == [(parent.run_id, ["actors"], {"runtime_s", "task_fps", "fps"}, None, ("verdict",))]
    tags = {"run-2": "2.00x slower than best; noise floor unknown", "run-4": "best; noise floor unknown"}
    assert experiment.run_tags == {run: {"verdict": text} for run, text in tags.items()}
    assert summary["verdict"] == [tags["run-2"], tags["run-4"]]  # summary.json says what the tags say
    assert parent.tags()["verdict_metric"] == "runtime_s" and parent.tags()["verdict_noise_floor_min"] == "0.0"
    assert parent.tags()["best"] == "actors=4"  # the run page shows its tags unfolded
    assert parent.tags()["verdict"].startswith("Best by median runtime_s: actors=4; noise floor unknown")
    out = capsys.readouterr().out
    assert f"parent run {parent.run_id} (sweep actors=2,4 #2) FINISHED" in out
    assert "energy_per_task_j: no RAPL" in out  # why a printed column is empty
    assert f"viewStateShareKey=rlbench-{parent.run_id}" in out
    last = out.strip().splitlines()[-5:]  # where to look, the answer in words, then the next command
    assert last[0].startswith("[rlbench sweep] MLflow UI: http://127.0.0.1:5000/")
    assert last[1] == "[rlbench sweep] Best (runtime_s): job 1 actors=4"
    assert last[2] == (
        "[rlbench sweep] Verdict: Best by median runtime_s: actors=4; noise floor unknown: one run per "
        "configuration; rerun with repeats=3 to tell"
    )
    assert last[3] == (
        "[rlbench sweep] - actors=4 is 2.00x faster than actors=2; noise floor unknown: one run per "
        "configuration; rerun with repeats=3 to tell"
    )
    assert last[4] == f"[rlbench sweep] Next: python -m rlbench.report --sweep {parent.run_id} --tracking-uri '{URI}'"


def test_a_failed_job_fails_the_sweep_but_not_the_other_jobs(capsys):
    launcher, experiment = Launcher(fail={4}), FakeExperiment()
    with pytest.raises(SystemExit) as exit_, exits("rlbench"):  # as the sweeper runs it
        sweep([["actors=2"], ["actors=4"], ["actors=8"]], launcher, experiment)
    assert exit_.value.code == 1 and len(launcher.launched) == 3
    ((_, parent),) = experiment.opened
    assert parent.statuses == ["FAILED"]
    assert parent.tables["summary.json"]["status"] == ["FINISHED", "FAILED", "FINISHED"]
    assert parent.tables["summary.json"]["run_id"][1] == "run-4"  # the failed job's own run
    assert "JobFailed: boom" in parent.texts["summary.csv"]
    assert parent.metrics["jobs_failed"] == 1.0 and parent.metrics["jobs_finished"] == 2.0
    assert "· FAILED · 3 jobs: 2 finished, 1 failed" in parent.note
    assert "rlbench: 1 of 3 jobs failed: actors=4" in capsys.readouterr().err


def test_resume_skips_the_jobs_whose_config_already_finished():
    jobs = [["actors=2"], ["actors=4"], ["actors=8"]]
    confs = [Conf(actors_of(j), resume=True) for j in jobs]
    done = [
        RunRecord("r0", "", "7", "FINISHED", metrics={"runtime_s": 9.0}, tags={"config_hash": config_hash(confs[0])}),
        RunRecord(
            "r1",
            "",
            "7",
            "FINISHED",
            params={"config_hash": config_hash(confs[1])},  # an older run: a param
            tags={"mlflow.parentRunId": "another sweep"},
        ),
    ]
    launcher = Launcher()
    rows, experiment, parent = sweep(jobs, launcher, FakeExperiment(finished=done), confs)
    assert [actors_of(o) for o in launcher.launched] == [8]
    # judged over every job; another sweep's child keeps that sweep's verdict
    assert experiment.run_tags == {
        "r0": {"verdict": "best; noise floor unknown"},
        "run-8": {"verdict": "38.9% slower than best; noise floor unknown"},
    }
    # the jobs not rerun are the sweep's all the same: their earlier runs, with their numbers
    assert [(r["status"], r["run_id"]) for r in rows] == [("FINISHED", "r0"), ("FINISHED", "r1"), ("FINISHED", "run-8")]
    assert rows[0]["runtime_s"] == 9.0 and parent.tables["summary.json"]["run_id"] == ["r0", "r1", "run-8"]
    assert "3 jobs: 3 finished" in parent.note and parent.statuses == ["FINISHED"]
    launcher = Launcher()  # without resume=true the same finished runs are run again
    sweep(jobs, launcher, FakeExperiment(finished=done))
    assert len(launcher.launched) == 3


def test_repeats_tag_each_job_with_its_configuration_and_log_the_per_configuration_table():
    jobs = [["actors=2", "seed=1"], ["actors=2", "seed=2"], ["actors=4", "seed=1"], ["actors=4", "seed=2"]]
    launcher = Launcher()
    rows, experiment, parent = sweep(jobs, launcher, grid=SimpleNamespace(repeats=2, repeat=[0, 1, 0, 1]))
    assert parent.name == "sweep actors=2,4 repeats=2" and parent.params["repeats"] == 2
    assert launcher.launched[3][-3:] == [
        "++tracking.tags.repeat=1",
        "++tracking.tags.repeats=2",
        "++tracking.tags.repeat_group='actors=4'",
    ]
    assert [(r["config"], r["repeat"]) for r in rows] == [
        ("actors=2", 0),
        ("actors=2", 1),
        ("actors=4", 0),
        ("actors=4", 1),
    ]
    assert (
        parent.texts["summary_configs.csv"].splitlines()[2].startswith("actors=4,2,2,2 FINISHED,2 3,25.0,25.0,25.0,2")
    )
    assert parent.texts["summary_configs.csv"].splitlines()[2].endswith(",best; noise floor 0.0%")
    assert experiment.views[0][1:] == (
        ["actors"],
        {"runtime_s", "task_fps", "fps"},
        "repeat_group",
        ("verdict",),
    )  # no seed knob
    assert experiment.run_tags == {
        "run-2": {"verdict": "slower than best: 2.00x slower; noise floor 0.0%"},
        "run-4": {"verdict": "best; noise floor 0.0%"},
    }


def test_a_resumed_sweep_continues_its_earlier_parent_with_every_job():
    """resume=true after a killed sweep: the same parent, RUNNING again, gets the remaining jobs
    (no `... #2` parent), and its summary lists every job of it."""
    jobs = [["actors=2"], ["actors=4"]]
    confs = [Conf(actors_of(j), resume=True) for j in jobs]
    earlier = FakeParent(run_id="e" * 32, name="sweep actors=2,4")
    done = [RunRecord("r0", "", "7", "FINISHED", tags={"config_hash": config_hash(confs[0])})]
    key = sweep_key([config_hash(c) for c in confs], 1)
    experiment, launcher = FakeExperiment(finished=done, found={key: earlier}), Launcher()
    sweeper = SimpleNamespace(
        launcher=launcher, config=SimpleNamespace(hydra=SimpleNamespace(runtime=SimpleNamespace(choices={})))
    )
    rows = run_grid(sweeper, ["actors=2,4", "resume=true"], jobs, confs, store=experiment.open).rows
    assert experiment.opened == [] and earlier.statuses == ["RUNNING", "FINISHED"]
    assert [actors_of(o) for o in launcher.launched] == [4]
    assert f"tracking.parent_run_id={earlier.run_id}" in launcher.launched[0]
    assert (
        earlier.tables["summary.json"]["run_id"] == ["r0", "run-4"] and [r["status"] for r in rows] == ["FINISHED"] * 2
    )


def test_ctrl_c_ends_the_parent_killed_and_its_summary_lists_every_job():
    experiment = FakeExperiment()
    with pytest.raises(KeyboardInterrupt) as stop:
        sweep([["actors=2"], ["actors=4"], ["actors=8"]], Basic(interrupt_at=1), experiment)
    ((_, parent),) = experiment.opened
    assert parent.statuses == ["KILLED"] and "· KILLED · 3 jobs: 1 finished, 1 killed, 1 not started" in parent.note
    assert parent.tables["summary.json"]["status"] == ["FINISHED", "KILLED", "NOT STARTED"]
    assert stop.value.records == [("sweep parent", parent.run_id, "KILLED")]  # the command's last line says so


def test_a_sweep_whose_artifacts_cannot_be_written_is_refused_before_any_parent(capsys):
    experiment = FakeExperiment(unwritable="tracking.artifact_location: /x cannot be written")
    with pytest.raises(SystemExit) as exit_, exits("rlbench"):  # as the sweeper runs it
        run_grid(SimpleNamespace(launcher=Launcher()), [], [["actors=2"]], [Conf(2)], store=experiment.open)
    assert exit_.value.code == 2 and experiment.opened == [] and experiment.stale_marked == 0
    assert "/x cannot be written; no job started" in capsys.readouterr().err


def test_a_view_that_cannot_be_stored_leaves_the_record_standing(capsys):
    rows, _, parent = sweep([["actors=2"]], Launcher(), FakeExperiment(view_error=RuntimeError("no tag")))
    assert parent.statuses == ["FINISHED"] and rows[0]["status"] == "FINISHED"
    assert "runs?workflowType=machine_learning" in capsys.readouterr().out  # the runs table, no shared view


def test_the_parent_life_ends_it_however_its_body_or_its_record_goes():
    parent, closed = FakeParent(), []
    assert live(parent, lambda: "FAILED", closed.append) == "FAILED"  # a job failed: the body says so
    with pytest.raises(ValueError):
        live(parent, lambda: (_ for _ in ()).throw(ValueError("bug")), closed.append)

    def broken_close(status):
        raise OSError("store went away")

    with pytest.raises(OSError):
        live(parent, lambda: "FINISHED", broken_close)
    assert closed == ["FAILED", "FAILED"] and parent.statuses == ["FAILED", "FAILED", "FINISHED"]


def test_the_basic_launcher_is_told_after_hydra_scans_its_plugins_again():
    """Hydra's plugin scan executes basic_launcher's module again (each main() in one process):
    its new class, a subclass of the old one, and no other launcher."""
    import importlib.util

    from hydra._internal.core_plugins import basic_launcher

    from rlbench.prepare.grid import in_process

    old = basic_launcher.BasicLauncher
    spec = importlib.util.find_spec(basic_launcher.__name__)
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)  # as Hydra's scanner does
    assert again.BasicLauncher is not old and not isinstance(again.BasicLauncher(), old)
    assert in_process(again.BasicLauncher()) and in_process(old()) and in_process(Basic(interrupt_at=9))
    assert not in_process(Launcher())


def test_the_config_a_sweep_hands_its_job_is_the_one_its_whole_line_composes_and_validates():
    """A sweep validates each job once and hands the launcher's job that config (rlbench/prepare/job.py):
    with its parent, name, store and repeat tags set, it equals its whole command line's."""
    from rlbench.prepare.compose import compose_job
    from rlbench.sweeps.sweep import child_config, child_overrides, tag_overrides

    job = ["env=cartpole", "actors=2", "seed=10001"]
    grid_config = compose_job(job)
    tracking = dataclasses.replace(grid_config.tracking, uri="sqlite:///elsewhere/m.db", experiment="rlbench-x+y")
    tags = {"repeat": "1", "repeats": "2", "repeat_group": "it's actors=2"}
    whole = [*job, *child_overrides(tracking, "abc123", "actors=2 seed=10001"), *tag_overrides(tags)]
    assert child_config(grid_config, tracking, "abc123", "actors=2 seed=10001", tags) == compose_job(whole)
