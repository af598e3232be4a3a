"""Stores that cannot be used get one line naming the store, the cause and what to do, within
seconds, before any work; a store two processes open at once works for both.

- the SQLite file checks (rlbench/prepare/store_files.py): a folder, a garbage file, another kind of
  database, a read-only folder or file, a full disk (the probes are patched: no disk is filled);
- the schema of an MLflow database of another MLflow version;
- the Optuna storage: an unparseable URL, an MLflow database given as the study, a driver;
- every command refuses before its work: report, predict, profile, the pipelines, and (e2e)
  a job, a sweep and a search;
- MLflow's HTTP retries are bounded for our processes;
- (e2e) two jobs starting at once in one new SQLite store both end FINISHED.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import sys
import time

import mlflow
import pytest

from rlbench.prepare import store_files
from rlbench.prepare.preflight import PreflightError, check
from tests.conftest import CARTPOLE_TINY, ROOT, runs
from tests.servers import free_port


@pytest.fixture
def garbage(tmp_path):
    path = tmp_path / "mlflow.db"
    path.write_bytes(b"this is not a database, it is a note\n" * 100)
    return path


@pytest.fixture(scope="module", autouse=True)
def drivers_imported():
    """What the preflight imports on first use (SQLAlchemy, the PostgreSQL driver, Optuna, rlbench's
    MLflow port), imported before any refusal is timed: on a busy 2-core host, with another pytest
    worker beside this one, a first import alone can take 3 s. A missing one is left to the test
    that names it."""
    for name in (
        "sqlalchemy",
        "sqlalchemy.dialects.postgresql.psycopg",
        "psycopg",
        "optuna.storages",
        "rlbench.tracking.store",
    ):
        with contextlib.suppress(ImportError):
            __import__(name)


def refused(uri: str | None = None, storage: str | None = None, **kw) -> str:
    """The preflight's message for these stores; fails unless it comes within 3 s (first imports
    done: drivers_imported)."""
    t0 = time.monotonic()
    with pytest.raises(PreflightError) as e:
        check(uri, storage, **kw)
    assert time.monotonic() - t0 < 3.0, "a refusal must come in seconds, not after MLflow's retries"
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_garbage_file_a_folder_and_a_file_in_the_way_are_refused(garbage, tmp_path):
    uri = f"sqlite:///{garbage}"
    assert refused(uri) == (
        f"tracking.uri={uri}: {garbage} is not an SQLite database (it starts with b'this is '); "
        "point tracking.uri at an MLflow tracking store's file, or at a new path to start one"
    )
    assert (
        "is a folder, not a database file; name the database file, e.g. "
        f"tracking.uri=sqlite:///{tmp_path}/mlflow.db" in refused(f"sqlite:///{tmp_path}")
    )
    assert f"{garbage} is a file, not a folder" in refused(f"sqlite:///{garbage}/sub/mlflow.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]  # nothing created


def test_another_kind_of_sqlite_database_is_refused(tmp_path):
    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text)")
    assert f"{other} is not an MLflow tracking store (its tables: notes)" in refused(f"sqlite:///{other}")
    assert f"search.storage=sqlite:///{other}: {other} is not an Optuna study storage" in refused(
        storage=f"sqlite:///{other}"
    )


def test_mlflow_and_optuna_databases_swapped_are_named(empty_store_db, tmp_path):
    import optuna

    study = tmp_path / "optuna.db"
    optuna.create_study(storage=f"sqlite:///{study}", study_name="s")
    assert "is not an MLflow tracking store (it is an Optuna study storage)" in refused(f"sqlite:///{study}")
    assert "is not an Optuna study storage (it is an MLflow tracking store)" in refused(
        storage=f"sqlite:///{empty_store_db}"
    )
    check(f"sqlite:///{empty_store_db}", f"sqlite:///{study}")  # each in its place: fine


def test_an_mlflow_database_of_another_mlflow_version_is_named_with_what_to_do(empty_store_db, tmp_path):
    for revision, said in (
        ("451aebb31d03", "its MLflow schema is older (revision 451aebb31d03)"),
        ("ffffffffffff", "is unknown to this MLflow"),
    ):
        db = tmp_path / f"{revision}.db"
        db.write_bytes(empty_store_db.read_bytes())
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))
        message = refused(f"sqlite:///{db}")
        assert said in message
        assert ("mlflow db upgrade" if revision.startswith("4") else "pip install -U mlflow") in message


def test_a_store_another_process_is_creating_is_waited_for_not_called_older(empty_store_db, tmp_path):
    """Two jobs starting at once into a new store: one runs MLflow's migrations under the store's
    lock (first_open), the other's preflight must not read the half-made schema as an older
    MLflow's (seen in CI: 'its MLflow schema is older (revision 5d2d30f0abce)')."""
    import threading

    from rlbench.tracking.store import first_open

    db = tmp_path / "mlflow.db"
    db.write_bytes(empty_store_db.read_bytes())
    with sqlite3.connect(db) as conn:
        head = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        conn.execute("UPDATE alembic_version SET version_num = '451aebb31d03'")  # mid-migration
    url, errors = f"sqlite:///{db}", []

    def preflight():
        try:
            check(url, None)
        except PreflightError as e:
            errors.append(str(e))

    with first_open(url):  # "another process" migrating
        waiting = threading.Thread(target=preflight)
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive(), "the preflight read the store while its tables were being made"
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE alembic_version SET version_num = ?", (head,))  # the migration ends
    waiting.join(20)
    assert not waiting.is_alive() and errors == []


def test_a_read_only_folder_or_file_is_refused(empty_store_db, tmp_path, monkeypatch):
    """Root writes anywhere, so the refusals of the OS are simulated where the probes meet it."""

    def read_only(*args, **kw):
        raise PermissionError(errno.EACCES, "Permission denied")

    db = tmp_path / "mlflow.db"
    db.write_bytes(empty_store_db.read_bytes())
    monkeypatch.setattr(store_files.tempfile, "mkstemp", read_only)
    assert (
        f"{tmp_path} is read-only (Permission denied); make it writable for this user, or point "
        "tracking.uri at a writable folder" in refused(f"sqlite:///{db}")
    )
    monkeypatch.undo()
    monkeypatch.setattr(store_files, "open", read_only, raising=False)  # the file itself (r+b, as SQLite opens it)
    assert f"{db} is read-only (Permission denied)" in refused(f"sqlite:///{db}")


def test_a_full_disk_is_refused(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    monkeypatch.setattr(store_files, "free_bytes", lambda folder: 2**20)
    assert (
        f"only 1.0 MiB free on the disk of {tmp_path} (at least 64 MiB needed); free space there, or point "
        "tracking.uri at another disk" in refused(uri)
    )

    def full(folder):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_files, "write_probe", full)
    assert f"no space left on the disk of {tmp_path} (No space left on device)" in refused(uri)
    assert not (tmp_path / "mlruns").exists()


def test_a_new_store_in_a_new_folder_passes_and_nothing_is_created(tmp_path):
    check(f"sqlite:///{tmp_path}/a/b/mlflow.db", f"sqlite:///{tmp_path}/c/optuna.db")
    assert list(tmp_path.iterdir()) == []
    assert "no database at" in refused(f"sqlite:///{tmp_path}/a/mlflow.db", reading=True, key="--tracking-uri")


def test_optuna_storage_that_cannot_be_parsed_or_has_no_driver():
    assert refused(storage="not a url").startswith("search.storage=not a url: cannot use this URL: ArgumentError")
    message = refused(storage="postgresql+pg8000://u:pw@127.0.0.1/db")
    assert "its database driver 'pg8000' is not installed; pip install 'pg8000'" in message and ":pw@" not in message


def test_plain_postgresql_url_has_its_driver_installed():
    """postgresql:// is what the README recommends; SQLAlchemy 2.1 maps it to psycopg (3), which
    pyproject.toml installs: the refusal is the connection's, not a missing module's."""
    message = refused(storage=f"postgresql://bob:hunter2@127.0.0.1:{free_port()}/optuna")
    assert "an Optuna study storage not reachable: connect failed" in message and "hunter2" not in message


def test_an_unreachable_tracking_server_is_refused_in_seconds():
    port = free_port()
    assert refused(f"http://127.0.0.1:{port}") == (
        f"tracking.uri=http://127.0.0.1:{port}: MLflow tracking server not reachable: GET /health failed: [Errno 111] "
        "Connection refused; start it (docs/scale-out.md), or point tracking.uri / MLFLOW_TRACKING_URI elsewhere"
    )


def test_mlflow_http_retries_are_bounded_unless_the_user_set_them(monkeypatch):
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT

    from rlbench.tracking.store import use_store

    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.setenv(name, "0")  # so that undo removes what use_store sets
        monkeypatch.delenv(name)
    use_store(f"http://127.0.0.1:{free_port()}")
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() <= 2 and MLFLOW_HTTP_REQUEST_TIMEOUT.get() <= 20
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
    use_store("sqlite:///x.db")
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 5


# --- every command refuses before its work ------------------------------------------------


def one_line(err: str, prog: str, uri: str, cause: str = "not an SQLite database") -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"{prog}: --tracking-uri={uri}: ") and cause in lines[0], err


@pytest.mark.timeout(60)
def test_report_and_predict_refuse_a_garbage_store_at_once(garbage, capsys):
    from rlbench.cli.predict import main as predict
    from rlbench.cli.report import main as report

    uri = f"sqlite:///{garbage}"
    assert report(["--sweep", "0" * 32, "--tracking-uri", uri]) == 2
    one_line(capsys.readouterr().err, "rlbench.report", uri)
    assert predict(["--tracking-uri", uri, "env=cartpole", "actors=2"]) == 2  # the wrapper's code, as report's
    one_line(capsys.readouterr().err, "rlbench.predict", uri)


def test_profile_refuses_a_store_it_cannot_log_to_before_measuring(garbage, capsys, monkeypatch):
    """It measured for minutes, then failed to log (a server that is down: hung with no message)."""
    import rlbench.cli.profile

    def measured(*a):
        raise AssertionError("measured before the store was checked")

    monkeypatch.setattr(rlbench.cli.profile, "measure", measured)
    for uri, cause in (
        (f"sqlite:///{garbage}", "not an SQLite database"),
        (f"http://127.0.0.1:{free_port()}", "MLflow tracking server not reachable"),
    ):
        assert rlbench.cli.profile.main(["--tracking-uri", uri, "--threads", "1", "--units", "1", "env=cartpole"]) == 2
        one_line(capsys.readouterr().err, "rlbench.profile", uri, cause)


def test_pipeline_refuses_a_garbage_store_before_its_sweep(garbage, capsys, monkeypatch):
    import rlbench.cli.run_and_report as pipeline

    def swept(overrides):
        raise AssertionError("the sweep started")

    monkeypatch.setattr(pipeline, "run_sweep_command", swept)
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as e:
        pipeline.run_pipeline("actor_sweep", ["env=cartpole"], [], [f"tracking.uri=sqlite:///{garbage}"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pipelines/actor_sweep.py: tracking.uri=sqlite:///{garbage}: ") and "\n" not in err


def test_job_sweep_and_search_refuse_unusable_stores_in_seconds(garbage, tmp_path, rlbench_main):
    """The command's main() in this process (the refusal, its one line and exit 2, as a shell sees them)."""
    base = [
        "env=cartpole",
        "algo=random",
        "workload=smoke",
        "tracking.experiment=t",
        f"hydra.run.dir={tmp_path}/out",
        f"hydra.sweep.dir={tmp_path}/multirun",
    ]
    cases = [
        ([f"tracking.uri=sqlite:///{garbage}"], f"tracking.uri=sqlite:///{garbage}: ", "not an SQLite database"),
        (
            ["-m", "seed=1,2", f"tracking.uri=sqlite:///{tmp_path}"],
            f"tracking.uri=sqlite:///{tmp_path}: ",
            "is a folder, not a database file",
        ),
        (
            [
                "-m",
                "search=ratio",
                "search.objectives=[fps]",
                "search.directions=[maximize]",
                f"tracking.uri=sqlite:///{tmp_path}/m.db",
                f"search.storage=sqlite:///{garbage}",
            ],
            f"search.storage=sqlite:///{garbage}: ",
            "not an SQLite database",
        ),
    ]
    for args, key, cause in cases:
        t0 = time.monotonic()
        out = rlbench_main([*args, *base])
        assert out.returncode == 2, out.stderr[-2000:]
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"rlbench: {key}") and cause in lines[0], out.stderr[-2000:]
        assert time.monotonic() - t0 < 30
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "multirun").exists()


@pytest.mark.e2e
def test_two_jobs_at_once_in_one_new_store_both_finish(tmp_path):
    """Two processes opening a new SQLite store at once both ran MLflow's migrations, and one
    failed ("duplicate column name"); now the first open is serialised (tracking/store.py). Both
    jobs train and log their telemetry into the one store at once, and both records are whole
    (the check tests/test_faults.py made on a second pair of jobs in an existing store)."""
    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    args = [
        *CARTPOLE_TINY,
        "actors=2",
        "telemetry.rate_hz=2",
        "eval_envs=0",
        "tracking.experiment=test",
        "tracking.system_metrics=false",
        f"tracking.uri={uri}",
    ]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "rlbench", *args, f"seed={i}", f"hydra.run.dir={tmp_path}/out{i}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n----\n".join(err[-3000:] for _, err in outs)
    found = runs(uri)
    assert len(found) == 2 and {r.info.status for r in found} == {"FINISHED"}
    assert sorted(r.data.params["seed"] for r in found) == ["0", "1"]
    client = mlflow.MlflowClient()
    assert all("config.yaml" in {a.path for a in client.list_artifacts(r.info.run_id)} for r in found)
    assert all(r.data.metrics["learner_updates"] == 2 for r in found)


def _malformed(path):
    """An SQLite file whose header is whole and whose pages are not."""
    with sqlite3.connect(path) as db:
        db.execute("create table notes (text)")
        db.executemany("insert into notes values (?)", [("a" * 500,)] * 100)
    data = bytearray(path.read_bytes())
    data[100 : 3 * 4096] = b"\xff" * (3 * 4096 - 100)
    path.write_bytes(bytes(data))


def test_a_single_run_refused_for_its_store_leaves_no_output_folder(garbage, tmp_path, rlbench_main, monkeypatch):
    """Each of the nine store refusals of a single run: exit 2, one line naming the setting, and
    no Hydra outputs/<date>/<time>/ folder (the store is checked before Hydra makes it)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # Hydra's default run folder, outputs/..., would be made here
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    notes = tmp_path / "notes.db"
    with sqlite3.connect(notes) as db:
        db.execute("create table notes (text)")
    _malformed(tmp_path / "malformed.db")
    new = f"tracking.uri=sqlite:///{tmp_path}/new/mlflow.db"
    cases = {
        "a server not reachable": [f"tracking.uri=http://127.0.0.1:{free_port()}"],
        "PostgreSQL to nowhere": [f"tracking.uri=postgresql://u:secret@127.0.0.1:{free_port()}/db"],
        "a folder": [f"tracking.uri=sqlite:///{tmp_path}/a-folder"],
        "ftp://": ["tracking.uri=ftp://example.invalid/store"],
        "a file that is no SQLite": [f"tracking.uri=sqlite:///{garbage}"],
        "a malformed SQLite file": [f"tracking.uri=sqlite:///{tmp_path}/malformed.db"],
        "another kind of database": [f"tracking.uri=sqlite:///{notes}"],
        "a file in the way of its folder": [f"tracking.uri=sqlite:///{garbage}/sub/mlflow.db"],
        "an unwritable artifact location": [new, f"tracking.artifact_location={tmp_path}/a-file/artifacts"],
    }
    for case, args in cases.items():
        out = rlbench_main(["env=cartpole", "algo=random", "workload=smoke", "tracking.experiment=t", *args])
        lines = out.stderr.strip().splitlines()
        key = args[-1].split("=")[0]
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"rlbench: {key}"), (case, out.stderr)
        assert "secret" not in out.stderr, case
        assert list(work.iterdir()) == [], (case, list(work.rglob("*")))
    assert not (tmp_path / "new").exists()
