"""A run's life told truly, without training: runs whose process is gone are closed at the next
start in any experiment; a profile is used only once complete; a stopped command says what it
recorded and exits 128 + the signal; a record that lost artifacts is not FINISHED."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest

from rlbench.config.schema import TrackingConfig
from rlbench.core.signals import UNENDED
from rlbench.tracking.orphans import owner_tags
from tests.conftest import ROOT, runs


def _tracking(store, experiment: str = "test", **kw) -> TrackingConfig:
    return TrackingConfig(uri=store["uri"], experiment=experiment, **kw)


def _dead_owner() -> dict[str, str]:
    """Owner tags of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    tags = owner_tags() | {"rlbench.owner.pid": str(child.pid)}
    child.wait()
    return tags


def _experiment(name: str) -> str:
    from rlbench.tracking.store import open_experiment

    return open_experiment(TrackingConfig(uri=mlflow.get_tracking_uri(), experiment=name))


def test_runs_whose_process_is_gone_are_killed_in_every_experiment_at_once(store):
    from rlbench.tracking.store import mark_stale_runs

    mlflow.set_tracking_uri(store["uri"])
    client, other = mlflow.MlflowClient(), _experiment("another-experiment")
    dead = _dead_owner()
    gone = client.create_run(other, tags=dead)  # no heartbeat yet: only its owner says it is gone
    reused = client.create_run(other, tags=owner_tags() | {"rlbench.owner.started": "1.00"})  # pid now someone else's
    alive = client.create_run(other, tags=owner_tags())
    closed = mark_stale_runs(_tracking(store))  # a start in experiment "test" closes them too
    assert sorted(closed) == sorted([gone.info.run_id, reused.info.run_id])
    for run, status in ((gone, "KILLED"), (reused, "KILLED"), (alive, "RUNNING")):
        assert client.get_run(run.info.run_id).info.status == status
    reason = client.get_run(gone.info.run_id).data.tags["end_reason"]
    assert reason.startswith(
        f"orphaned: its process {dead['rlbench.owner.pid']} on {dead['rlbench.owner.host']} is gone (killed?)"
    )


def test_a_parent_whose_process_is_gone_closes_only_when_none_of_its_jobs_lives(store):
    from rlbench.tracking.store import mark_stale_runs

    mlflow.set_tracking_uri(store["uri"])
    client, exp = mlflow.MlflowClient(), _experiment("test")
    sweep = client.create_run(exp, tags=_dead_owner() | {"rlbench.role": "sweep"})
    client.create_run(exp, tags=_dead_owner() | {"mlflow.parentRunId": sweep.info.run_id})
    study = client.create_run(exp, tags=_dead_owner() | {"rlbench.role": "study"})  # another worker's trial runs on
    client.create_run(exp, tags=owner_tags() | {"mlflow.parentRunId": study.info.run_id})
    mark_stale_runs(_tracking(store))
    assert client.get_run(sweep.info.run_id).info.status == "KILLED"
    assert client.get_run(study.info.run_id).info.status == "RUNNING"


def test_runs_of_another_host_keep_the_heartbeat_rule(store):
    from rlbench.tracking.store import mark_stale_runs

    mlflow.set_tracking_uri(store["uri"])
    client, exp = mlflow.MlflowClient(), _experiment("test")
    away = {"rlbench.owner.host": "elsewhere", "rlbench.owner.pid": "1", "rlbench.owner.started": "1.00"}
    old = client.create_run(exp, tags=away | {"heartbeat": f"{time.time() - 60:.0f}"})
    fresh = client.create_run(exp, tags=away | {"heartbeat": f"{time.time():.0f}"})
    assert mark_stale_runs(_tracking(store, stale_after_s=30)) == [old.info.run_id]
    assert client.get_run(old.info.run_id).info.status == "FAILED"
    assert client.get_run(fresh.info.run_id).info.status == "RUNNING"


def _profile_tables():
    return {
        "env": [{"threads": 1, "envs": 4, "sps": 100.0, "env_step_s": 0.01}],
        "inference": [{"units": 1, "batch": 4, "seconds": 0.001}],
        "update": [],
        "corun": [],
        "power": [],
    }


def test_a_profile_stopped_while_logging_is_killed_and_refused_with_its_reason(store, monkeypatch):
    from rlbench.predict.curves import ProfileError, load_profile
    from rlbench.tracking.profiles import profile_runs, write_profile

    tracking = _tracking(store, "profiles")
    real = mlflow.log_metrics

    def stopped_here(*a, **kw):
        raise KeyboardInterrupt  # after the tables, before the metrics and the figure

    monkeypatch.setattr(mlflow, "log_metrics", stopped_here)
    with pytest.raises(KeyboardInterrupt) as stop:
        write_profile(
            tracking, "profile x", {"env_id": "CartPole-v1"}, {"algo.name": "r2d2"}, _profile_tables(), {}, []
        )
    ((what, run_id, status),) = stop.value.records
    assert (what, status) == ("profile run", "KILLED") and mlflow.get_run(run_id).info.status == "KILLED"
    with pytest.raises(ProfileError, match=f"--profile={run_id}: profile 'profile x' is incomplete: status KILLED"):
        load_profile(run_id)
    monkeypatch.setattr(mlflow, "log_metrics", real)
    whole = write_profile(
        tracking, "profile y", {"env_id": "CartPole-v1"}, {"algo.name": "r2d2"}, _profile_tables(), {}, []
    )
    assert profile_runs(experiment="profiles") == [whole] and load_profile(whole).run_id == whole


def test_a_running_profile_with_its_tables_is_not_used(store):
    """What a profile SIGKILLed while logging leaves (its process gone or not yet closed)."""
    from rlbench.predict.curves import ProfileError, load_profile
    from rlbench.tracking.profiles import COMPLETE

    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    run = client.create_run(_experiment("profiles"), tags={"rlbench.role": "profile", COMPLETE: "false"})
    for name, rows in _profile_tables().items():
        if rows:
            client.log_table(run.info.run_id, {k: [r[k] for r in rows] for k in rows[0]}, f"{name}.json")
    with pytest.raises(ProfileError, match="is incomplete: status RUNNING"):
        load_profile(run.info.run_id)


def test_a_stopped_command_says_what_it_recorded_and_exits_128_plus_the_signal(capsys):
    from rlbench.core.signals import JobKilled, note_record, stopped

    killed = JobKilled(signal.SIGTERM)
    note_record(killed, "job run", "abc123", "KILLED")
    note_record(killed, "sweep parent", "def456", "KILLED")
    assert stopped(killed) == 143
    assert capsys.readouterr().err == (
        "rlbench: stopped by SIGTERM: job run abc123 recorded as KILLED; sweep parent def456 recorded as KILLED\n"
    )
    assert stopped(KeyboardInterrupt(), "rlbench profile") == 130
    assert capsys.readouterr().err == "rlbench profile: stopped by Ctrl-C (SIGINT): nothing was recorded\n"


def test_sigterm_takes_its_default_action_while_native_code_creates_envs():
    from rlbench.core.signals import sigterm_ends_at_once, sigterm_raises

    with sigterm_raises():
        handler = signal.getsignal(signal.SIGTERM)
        with sigterm_ends_at_once():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is handler


def test_a_job_whose_clean_up_outlasts_its_stop_bound_exits_143_at_the_bound_naming_where():
    """The backstop: a stopped job whose clean-up does not end (a store write waiting on a lock)
    still exits 143 once `exit_within_s` has passed since the SIGTERM, with its one line."""
    code = (
        "import time\nfrom rlbench.core.signals import sigterm_raises\n"
        "with sigterm_raises(exit_within_s=1.0):\n    try:\n        print('ready', flush=True)\n"
        "        time.sleep(60)\n    finally:\n        time.sleep(60)  # a clean-up that never ends\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == "ready\n"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143 and 1.0 <= time.monotonic() - t0 < 5.0, err
    assert err == (
        "rlbench: stopped by SIGTERM: the job had not ended 1 s after the signal (main thread in <string>:8 "
        "<module>): exited there; a run it left RUNNING is closed KILLED by the next rlbench start\n"
    )


def test_an_artifact_location_that_cannot_be_written_is_named_before_any_run(store, tmp_path):
    from rlbench.tracking.store import artifact_problem

    (tmp_path / "a-file").write_text("")
    tracking = _tracking(store, artifact_location=str(tmp_path / "a-file" / "artifacts"))
    problem = artifact_problem(tracking)
    assert problem.startswith(f"tracking.artifact_location: the artifacts of experiment 'test' go to {tmp_path}/a-file")
    assert "cannot be written: Not a directory" in problem
    assert artifact_problem(_tracking(store, artifact_location=str(tmp_path / "fine"))) is None


def test_a_store_relative_location_without_rlbench_installed_is_named_before_any_run(store, monkeypatch):
    """Seen on a GPU host running a clone from PYTHONPATH: without rlbench's entry point every
    job ran, then ended FAILED unable to write any artifact; now refused before it starts."""
    from rlbench.tracking import artifacts
    from rlbench.tracking.store import artifact_problem

    tracking = _tracking(store)
    assert artifacts.scheme_registered() and artifact_problem(tracking) is None  # installed, as the README says
    monkeypatch.setattr(artifacts, "scheme_registered", lambda: False)
    problem = artifact_problem(tracking)
    assert problem.startswith("tracking.artifact_location: the artifacts of experiment 'test' go to rlbench-store:/")
    assert "rlbench is not installed in this Python" in problem and "pip install -e ." in problem
    assert artifact_problem(_tracking(store, artifact_location=str(store["db"].parent / "abs"))) is None  # no scheme


def test_a_job_whose_artifacts_could_not_be_written_ends_failed_naming_them(store, compose_cfg, monkeypatch):
    from rlbench.prepare.validate import validate
    from rlbench.tracking.record import IncompleteRecord, JobRecord

    cfg = compose_cfg(store["overrides"])
    conf = validate(cfg)

    def full_disk(*a, **kw):
        raise OSError(28, "No space left on device")

    lost = r"ended FAILED: its record is incomplete: could not write config.yaml \(OSError: \[Errno 28\] No space"
    with pytest.raises(IncompleteRecord, match=lost), JobRecord(conf, [], None) as record:
        monkeypatch.setattr(mlflow, "log_text", full_disk)
    run = mlflow.get_run(record.run_id)
    assert run.info.status == "FAILED" and "config.yaml" in run.data.tags["error"]


def test_a_sigterm_while_the_run_is_being_opened_ends_it_killed_and_names_it(store, compose_cfg, monkeypatch):
    """The run exists (a sweep's summary can see it) before its params are written: a stop
    there still ends it KILLED and puts it in the command's last line (CI saw it left out)."""
    from rlbench.core.signals import JobKilled
    from rlbench.prepare.validate import validate
    from rlbench.tracking.record import JobRecord

    cfg = compose_cfg(store["overrides"])
    conf = validate(cfg)
    opened = []

    def stopped_while_writing(*a, **kw):
        opened.append(mlflow.active_run().info.run_id)
        raise JobKilled()

    monkeypatch.setattr(mlflow, "log_params", stopped_while_writing)
    with pytest.raises(JobKilled) as stop, JobRecord(conf, [], None):
        pytest.fail("the body must not run")
    (run_id,) = opened
    assert stop.value.records == [("job run", run_id, "KILLED")]
    assert mlflow.get_run(run_id).info.status == "KILLED"


def test_a_sigterm_a_finalizer_swallowed_is_raised_again_by_the_jobs_main_loop(monkeypatch):
    """Python runs the SIGTERM handler between any two bytecodes, finalizers included, where its
    JobKilled is printed and dropped (CI: inside SQLAlchemy's registry cleanup, and the job ran
    on); raise_pending, called by run_roles every tick, raises it again, once."""
    from rlbench.core.signals import JobKilled, raise_pending, sigterm_raises

    printed = []  # what Python's hook would print as "Exception ignored in ..."
    monkeypatch.setattr(sys, "unraisablehook", lambda u: printed.append(type(u.exc_value).__name__))
    with sigterm_raises():
        handler = signal.getsignal(signal.SIGTERM)

        class Finalized:
            def __del__(self):
                handler(signal.SIGTERM, None)

        Finalized()  # collected at once: the JobKilled its __del__ raises is ignored
        assert printed == []  # no "Exception ignored" traceback for it
        with pytest.raises(JobKilled):
            raise_pending()
        raise_pending()  # once
        Finalized()

        class Broken:
            def __del__(self):
                raise ValueError("other errors in finalizers are still printed")

        Broken()
        assert printed == ["ValueError"]
    raise_pending()  # leaving the job forgets a SIGTERM that unwound it


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_inside_a_store_query_is_raised_where_the_store_call_returns(store, monkeypatch, signum):
    """A JobKilled (SIGTERM) or KeyboardInterrupt (Ctrl-C) raised inside a query leaves sqlite's
    statement open (its traceback holds the cursor), and the read lock made every later write
    wait 20 s and fail "database is locked" (CI: a SIGTERM'd sweep that never ended). The
    handler lets the store call finish and raises to its caller; the store is left unlocked."""
    import sqlite3

    from sqlalchemy.engine import default

    from rlbench.core.signals import JobKilled, sigterm_raises

    mlflow.set_tracking_uri(store["uri"])
    run_id = mlflow.MlflowClient().create_run(_experiment("test")).info.run_id
    execute, signalled = default.DefaultDialect.do_execute, []

    def signal_after_a_query(self, cursor, statement, parameters, context=None):
        execute(self, cursor, statement, parameters, context)
        if statement.lstrip().upper().startswith("SELECT") and not signalled:
            signalled.append(statement)
            signal.raise_signal(signum)  # the handler runs here, inside the query's frames

    monkeypatch.setattr(default.DefaultDialect, "do_execute", signal_after_a_query)
    with sigterm_raises(), pytest.raises(KeyboardInterrupt) as raised:
        mlflow.MlflowClient().set_tag(run_id, "written", "whole")
    monkeypatch.undo()
    assert isinstance(raised.value, JobKilled) == (signum == signal.SIGTERM)
    assert signalled and sys.getprofile() is None
    assert mlflow.get_run(run_id).data.tags["written"] == "whole"  # the store call ran to its end
    locked = sqlite3.connect(store["db"], timeout=0.5)
    locked.execute("BEGIN EXCLUSIVE")  # raises "database is locked" while a read is left open
    locked.rollback()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was


def test_ctrl_c_pressed_again_while_a_store_call_finishes_stops_there_at_once(store, monkeypatch):
    """A store call that hangs (a lock, a server) holds the first Ctrl-C back; the second stops
    the command at once where it is, as Python's own handler would, and nothing is raised later."""
    from sqlalchemy.engine import default

    from rlbench.core.signals import sigterm_raises

    mlflow.set_tracking_uri(store["uri"])
    run_id = mlflow.MlflowClient().create_run(_experiment("test")).info.run_id
    execute, pressed = default.DefaultDialect.do_execute, []

    def pressed_twice_in_a_query(self, cursor, statement, parameters, context=None):
        if statement.lstrip().upper().startswith("SELECT") and not pressed:
            pressed.append(statement)
            signal.raise_signal(signal.SIGINT)  # held back until the store call returns
            assert sys.getprofile() is not None
            signal.raise_signal(signal.SIGINT)  # raised here
        execute(self, cursor, statement, parameters, context)

    monkeypatch.setattr(default.DefaultDialect, "do_execute", pressed_twice_in_a_query)
    with sigterm_raises(), pytest.raises(KeyboardInterrupt) as raised:
        mlflow.MlflowClient().set_tag(run_id, "written", "whole")
    monkeypatch.undo()
    assert [e.name for e in raised.traceback][-2:] == ["pressed_twice_in_a_query", "_on_sigint"]
    assert sys.getprofile() is None
    assert "written" not in mlflow.get_run(run_id).data.tags


def test_a_run_whose_end_cannot_be_written_is_never_left_to_end_finished(store, compose_cfg, monkeypatch):
    """A store that takes no more writes at the end (a full disk): the job is told its record is
    incomplete and MLflow holds no active run, so its exit hook cannot end the run FINISHED
    later; the run reads RUNNING until the next start closes it KILLED."""
    import sqlite3

    from rlbench.prepare.validate import validate
    from rlbench.tracking.record import IncompleteRecord, JobRecord

    cfg = compose_cfg(store["overrides"])
    conf = validate(cfg)

    def full(*a, **kw):
        raise sqlite3.OperationalError("database or disk is full")

    ended = r"reads RUNNING: .* could not write its end \(OperationalError"
    with pytest.raises(IncompleteRecord, match=ended), JobRecord(conf, [], None) as record:
        monkeypatch.setattr(mlflow.MlflowClient, "set_terminated", full)
    assert mlflow.active_run() is None
    monkeypatch.undo()
    assert mlflow.get_run(record.run_id).info.status == "RUNNING"


def test_a_finished_job_whose_record_and_end_a_full_disk_refused_has_a_line_saying_it_reads_running(
    store, compose_cfg, monkeypatch, caplog, tmp_path
):
    """The disk fills during a job's last writes: its artifacts and then its end refused. The
    line names the full disk and says the run reads RUNNING, as the store does (it said "ended
    FAILED" and the cause IncompleteRecord); the losses after the first are logged in one line."""
    import errno
    import logging
    import sqlite3

    from rlbench.api.task import _failed
    from rlbench.prepare.validate import validate
    from rlbench.tracking.record import IncompleteRecord, JobRecord

    conf = validate(compose_cfg(store["overrides"]))

    def no_space(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    def full(*a, **kw):
        raise sqlite3.OperationalError("database or disk is full")

    with (
        caplog.at_level(logging.WARNING, "rlbench.tracking.record"),
        pytest.raises(IncompleteRecord) as raised,
        JobRecord(conf, [], None) as record,
    ):
        monkeypatch.setattr(mlflow, "log_text", no_space)  # config.yaml
        monkeypatch.setattr(mlflow, "set_tag", full)  # the error tag
        monkeypatch.setattr(mlflow.MlflowClient, "set_terminated", full)  # the end
    monkeypatch.undo()
    line = str(_failed(raised.value, tmp_path / "job.log"))
    assert mlflow.get_run(record.run_id).info.status == "RUNNING"
    assert line.startswith("the job failed: the disk is full: ") and f"(run {record.run_id} {UNENDED})" in line, line
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "could not log config.yaml: [Errno 28] No space left on device",
        "the disk is full: could not log the error tag either",
    ]


def test_a_full_disk_is_named_in_the_faults_one_line_wherever_it_sits_in_the_chain():
    import errno
    import sqlite3

    from rlbench.api.task import fault_text

    try:
        try:
            raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.OperationalError as e:
            raise RuntimeError("(raised as a result of Query-invoked autoflush)\n... disk is full") from e
    except RuntimeError as e:
        wrapped = e
    assert fault_text(wrapped).startswith(
        "the disk is full: the store or an artifact could not be written (OperationalError: database or disk is full)"
    )
    assert "(OSError: [Errno 28]" in fault_text(OSError(errno.ENOSPC, "No space left on device"))
    assert fault_text(ValueError("boom\nthe rest")) == "ValueError: boom"


FULL = Path("/dev/full")  # every write fails ENOSPC: a full disk without filling one


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_the_jobs_log_file_stops_at_a_full_disk_and_prints_nothing(capsys):
    """logging's own FileHandler prints every record it cannot write, its traceback too, on
    stderr (`--- Logging error ---`); the job's log stops at the first full-disk error."""
    import errno
    import logging

    from rlbench.core.disk import LogFile

    handler = LogFile(FULL)
    log = logging.getLogger("test.full_log")
    log.addHandler(handler)
    try:
        for _ in range(3):
            try:
                raise RuntimeError("database or disk is full")
            except RuntimeError:
                log.exception("SQLAlchemy database error. The following exception is caught.")
    finally:
        log.removeHandler(handler)
        handler.close()
    assert capsys.readouterr().err == "" and handler.full.errno == errno.ENOSPC and handler.stream is None


def test_the_jobs_log_file_reports_other_errors_as_logging_does(tmp_path, capsys, monkeypatch):
    import logging

    from rlbench.core.disk import LogFile

    monkeypatch.setattr(logging, "raiseExceptions", True)
    handler = LogFile(tmp_path / "job.log")
    handler.handle(logging.makeLogRecord({"msg": "%d", "args": ("not a number",)}))
    handler.close()
    assert "--- Logging error ---" in capsys.readouterr().err and handler.full is None


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_a_faults_line_says_where_its_traceback_went_or_that_its_log_could_not_be_written(tmp_path):
    """The failure's own path needs no disk: a log that cannot be written is named on the line,
    and the traceback goes nowhere else."""
    from rlbench.api.task import _failed

    try:
        raise ValueError("boom")
    except ValueError as e:
        error = e
    error.run_id, error.run_status = "abc", "RUNNING"
    line = str(_failed(error, tmp_path / "job.log"))
    assert line.endswith(f"(run abc {UNENDED}); traceback in {tmp_path / 'job.log'}")
    assert "ValueError: boom" in (tmp_path / "job.log").read_text()
    line = str(_failed(error, FULL))
    assert line.endswith(f"; no traceback kept: {FULL} could not be written (No space left on device)"), line


def test_mlflows_logged_tracebacks_stay_off_the_terminal_and_its_other_errors_show(capsys):
    import logging

    from rlbench.tracking.store import mlflow_info_to_log_file

    mlflow_info_to_log_file()
    log = logging.getLogger("mlflow.store.db.utils")
    try:
        raise RuntimeError("database or disk is full")
    except RuntimeError:
        log.exception("SQLAlchemy database error. The following exception is caught.")
    log.error("an error without a traceback")
    for thread in ("mlflow.utils.async_logging.async_logging_queue", "mlflow.system_metrics.system_metrics_monitor"):
        logging.getLogger(thread).error("Failed to log run data: Exception: (raised as a result of Query-invoked")
    err = capsys.readouterr().err
    assert "an error without a traceback" in err and "SQLAlchemy database error" not in err and "Traceback" not in err
    assert "Failed to log run data" not in err  # MLflow's threads: one line a batch while the store takes none


def test_a_sigterm_in_a_single_run_ends_its_run_killed_and_the_command_143(store, rlbench_main, monkeypatch):
    """The wiring without a real job: the trainer is replaced by a call of the SIGTERM handler
    that run_job installed (no real signal, so no pytest process can be ended by it); the
    record ends KILLED and main() ends the process with stopped()'s line and 143 (os._exit,
    here caught: main_in_process reads it as the exit code)."""
    import logging
    import threading

    from rlbench.core import signals
    from rlbench.train import job

    def sigterm(plan, observers, timer):
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler), "run_job installed no SIGTERM handler"
        handler(signal.SIGTERM, sys._getframe())
        raise AssertionError("the handler did not stop the job")

    def exit_now(code):
        raise SystemExit(code)

    monkeypatch.setattr(job, "train", sigterm)
    monkeypatch.setattr(signals, "_exit_late", lambda *a: None)  # the 8 s backstop: nothing to back up here
    monkeypatch.setattr(signals, "_ending", threading.Lock())
    monkeypatch.setattr(logging, "shutdown", lambda *a, **kw: None)
    monkeypatch.setattr(signals.os, "_exit", exit_now)
    out = rlbench_main(
        ["env=cartpole", "algo=random", "workload=smoke", "telemetry.enabled=false", *store["overrides"]]
    )
    assert out.returncode == 143, out.stderr[-2000:]
    (run,) = runs(store["uri"])
    assert (
        out.stderr.strip().splitlines()[-1]
        == f"rlbench: stopped by SIGTERM: job run {run.info.run_id} recorded as KILLED"
    )
    assert run.info.status == "KILLED"
