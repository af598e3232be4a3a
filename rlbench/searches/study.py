"""The Optuna study shared by the workers: RDB storage with heartbeats and retries, the
PostgreSQL lock under which a worker claims a trial, and the claim itself (why the study ends
with exactly n_trials COMPLETE: docs/scale-out.md, "The search's workers, inside")."""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import threading
import warnings
from pathlib import Path
from typing import Self

import optuna
import sqlalchemy

from rlbench.config.schema import SearchConfig
from rlbench.searches.space import make_sampler, suggest


class StudyLock:
    """Serializes a study's bookkeeping across its workers: a PostgreSQL advisory lock.

    Session-level, on a connection of its own: a worker that dies holding it (SIGKILL) drops
    the connection and PostgreSQL releases the lock. Other storages take one worker
    (check_space), so there the lock does nothing."""

    def __init__(self, storage_url: str, study_name: str):
        self._url, self._conn = storage_url, None
        digest = hashlib.sha256(f"rlbench optuna study {study_name}".encode()).digest()
        self._key = int.from_bytes(digest[:8], "big", signed=True)
        self.enabled = storage_url.startswith("postgresql")

    def _connect(self):
        engine = sqlalchemy.create_engine(
            self._url, poolclass=sqlalchemy.pool.NullPool, connect_args={"connect_timeout": 10}
        )
        self._conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def _execute(self, sql: str) -> None:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._connect()
        self._conn.execute(sqlalchemy.text(sql), {"key": self._key})

    def __enter__(self) -> Self:
        if self.enabled:
            try:
                self._execute("SELECT pg_advisory_lock(:key)")
            except Exception:  # noqa: BLE001 - a connection dropped while idle (a long trial): one fresh one
                self.close()
                self._execute("SELECT pg_advisory_lock(:key)")
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled and self._conn is not None:
            self._execute("SELECT pg_advisory_unlock(:key)")

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


@contextlib.contextmanager
def quiet_optuna():
    """Inside: Optuna's warnings that the search's own calls are experimental (the heartbeat,
    the stale-trial callback, fail_stale_trials, the matplotlib plots), that its importances are
    for a low target (parent.py negates a maximised objective) and that a slice has one value,
    kept off the terminal; every other warning still shows."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings(
            "ignore", message="PedAnovaImportanceEvaluator computes the importances", category=UserWarning
        )
        warnings.filterwarnings(
            "ignore", message="Attempting to set identical low and high xlims", category=UserWarning
        )
        # the workers ask and tell themselves (trials.py) and beat the heartbeat themselves (Heartbeat)
        warnings.filterwarnings(
            "ignore", message="Heartbeat of storage is supposed to be used with Study.optimize", category=UserWarning
        )
        yield


def retry_callback(retries: int):
    """Optuna's retry of a stale or failed trial, under the name this Optuna gives it
    (RetryHeartbeatStaleTrialCallback from 4.9 on, RetryFailedTrialCallback before)."""
    retry = (
        getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    )
    with quiet_optuna():
        return retry(max_retry=retries)


def open_study(search: SearchConfig) -> optuna.Study:
    if search.storage.startswith("sqlite:///") and not search.storage.startswith("sqlite:////"):
        Path(search.storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    # optuna >= 4.9 names the stale-trial callback heartbeat_stale_trial_callback (the other name warns there)
    takes = inspect.signature(optuna.storages.RDBStorage).parameters
    callback = (
        "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in takes else "failed_trial_callback"
    )
    with quiet_optuna():
        storage = optuna.storages.RDBStorage(
            search.storage,
            heartbeat_interval=search.heartbeat_s,
            grace_period=3 * search.heartbeat_s,
            engine_kwargs={} if search.storage.startswith("sqlite") else {"pool_pre_ping": True},
            **{callback: retry_callback(search.retries)},
        )
    pruner = optuna.pruners.MedianPruner(n_startup_trials=search.pruner_startup_trials) if search.pruning else None
    study = optuna.create_study(
        study_name=search.study,
        storage=storage,
        load_if_exists=True,
        pruner=pruner,
        directions=list(search.directions),
        sampler=make_sampler(search, 0),
    )
    if study.metric_names != list(search.objectives):  # optuna-dashboard's axes: the objectives' names
        with quiet_optuna(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # set_metric_names is marked experimental in optuna 4
            study.set_metric_names(list(search.objectives))
    return study


class Heartbeat:
    """Records the running trial's heartbeat in the storage until stopped."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial, every_s: int):
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, args=(study._storage, trial._trial_id, every_s), name="optuna-heartbeat", daemon=True
        )

    def _beat(self, storage, trial_id: int, every_s: int) -> None:
        while True:
            storage.record_heartbeat(trial_id)
            if self._stop.wait(every_s):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def fail_gone_trials(study: optuna.Study, numbers: set[int], retries: int) -> int:
    """Fail now the RUNNING trials whose worker is known gone (their runs were just closed
    KILLED at this start) and queue their retry, as the heartbeat's stale-trial callback would
    after its grace period; returns how many."""
    storage, retry, failed = study._storage, retry_callback(retries), 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if t.number in numbers and storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL):
            with quiet_optuna():
                retry(study, storage.get_trial(t._trial_id))
            failed += 1
    return failed


def complete(study: optuna.Study) -> list:
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def state_counts(study: optuna.Study) -> dict[str, int]:
    counts = dict.fromkeys(("COMPLETE", "RUNNING", "WAITING", "FAIL", "PRUNED"), 0)
    for t in study.get_trials(deepcopy=False):
        counts[t.state.name] += 1
    return counts


DONE, WAIT = "done", "wait"


def claim_trial(study: optuna.Study, search: SearchConfig, lock: StudyLock):
    """Under the study lock: fail stale trials (queueing their retries), then a trial with its
    params if COMPLETE + RUNNING trials leave room below n_trials; else DONE or WAIT (others'
    running trials fill the quota, and one of them may still fail)."""
    with lock:
        with quiet_optuna():
            optuna.storages.fail_stale_trials(study)
        n = state_counts(study)
        if n["COMPLETE"] >= search.n_trials:
            return DONE
        if n["COMPLETE"] + n["RUNNING"] >= search.n_trials:
            return WAIT
        study.sampler = make_sampler(search, sum(n.values()))
        with quiet_optuna():
            trial = study.ask()  # pops a WAITING retry first, else a new trial
        # its first heartbeat before the lock opens: a trial without one is never found stale,
        # so a worker dying right here would otherwise hold its slot forever
        study._storage.record_heartbeat(trial._trial_id)
        return trial, suggest(trial, search)  # the sampler sees every running trial's params
