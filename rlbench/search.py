"""Optuna search for the CPU/GPU balance: `python -m rlbench -m search=ratio`.

Optuna >= 4 driven directly through ask/tell (hydra-optuna-sweeper pins optuna < 3). Every
trial is one real rlbench job, launched by the sweep's Hydra launcher, and its MLflow run
is a child of the study's parent run, tagged with the study and trial number.

Resuming: the study lives in `search.storage` under `search.study`; rerunning the command
continues it and stops once `search.n_trials` trials are COMPLETE in total. A trial whose
job fails or gives a non-finite objective is FAIL. Trials heartbeat while they run; one
whose worker died is failed at the next start (optuna.storages.fail_stale_trials) and
retried `search.retries` times (RetryFailedTrialCallback).

Many workers (N shells or a SLURM array, docs/scale-out.md) share one study in PostgreSQL.
Each worker takes a trial only under the study's lock (a PostgreSQL advisory lock): it
fails stale trials, counts COMPLETE and RUNNING trials, and asks for a new trial only when
they leave room below `search.n_trials`; otherwise it waits, since a running trial of
another worker may still fail (then this worker takes its place) or go stale (then its
heartbeat-found retry is queued WAITING and the next ask pops it). So the study ends with
exactly n_trials COMPLETE, no trial run twice and none lost.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import math
import sys
import threading
import time
from pathlib import Path

import mlflow
import optuna

from rlbench.config.schema import SearchConfig
from rlbench.preflight import masked
from rlbench.resources import usable_cpus
from rlbench.tracking.record import JobPruned

log = logging.getLogger(__name__)


class SearchError(ValueError):
    """A search that cannot run as configured; raised before the first trial."""


def check_space(search: SearchConfig, host_units: int) -> list[str]:
    """Problems with the search space against this host (empty if it is runnable)."""
    s, cpus, problems = search, len(usable_cpus()), []
    for key, bounds, top in (("actors", s.actors, None), ("actor_threads", s.actor_threads, cpus),
                             ("sm_limit", s.sm_limit, host_units)):
        bound = f", high <= {top} on this host" if top is not None else ""
        if len(bounds) != 2 or bounds[0] < 1 or bounds[1] < bounds[0] or (top is not None and bounds[1] > top):
            problems.append(f"search.{key}={list(bounds)}: allowed: [low, high] with 1 <= low <= high{bound}")
    if s.storage.startswith("sqlite") and s.workers > 1:
        problems.append(f"search.workers={s.workers} with SQLite storage {s.storage}: SQLite cannot take several "
                        "workers' writes reliably; use a PostgreSQL URL (postgresql://...)")
    elif s.workers > 1 and not s.storage.startswith("postgresql"):
        problems.append(f"search.workers={s.workers} with storage {masked(s.storage)}: allowed: a PostgreSQL URL "
                        "(postgresql+psycopg2://user:password@host:5432/db), whose lock keeps workers from "
                        "running more than search.n_trials")
    if s.workers < 1 or s.heartbeat_s < 1 or s.n_trials < 1:
        problems.append(f"search.workers={s.workers}, search.heartbeat_s={s.heartbeat_s}, "
                        f"search.n_trials={s.n_trials}: allowed: integers >= 1")
    if len(s.objectives) != len(s.directions) or not s.objectives:
        problems.append(f"search.objectives={list(s.objectives)} and search.directions={list(s.directions)}: "
                        "allowed: one direction per objective, at least one objective")
    if s.pruning and len(s.objectives) != 1:
        problems.append("search.pruning=true needs one objective (Optuna prunes single-objective studies only)")
    for d in s.directions:
        if d not in ("maximize", "minimize"):
            problems.append(f"search.directions: {d!r}: allowed: maximize or minimize")
    return problems


def suggest(trial: optuna.Trial, s: SearchConfig) -> dict[str, int]:
    """The trial's resources (log-uniform integers within the configured bounds)."""
    return {
        "actors": trial.suggest_int("actors", *s.actors, log=s.actors[1] > s.actors[0]),
        "actor_threads": trial.suggest_int("actor_threads", *s.actor_threads),
        "sm_limit": trial.suggest_int("sm_limit", *s.sm_limit),
    }


def objective_values(result: dict | None, objectives: list[str]) -> list[float] | None:
    """The job's objective metrics, or None when any is missing or not finite (trial FAIL)."""
    if not isinstance(result, dict):
        return None
    values = [result.get(name) for name in objectives]
    if any(v is None or not math.isfinite(v) for v in values):
        return None
    return [float(v) for v in values]


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
        import sqlalchemy

        engine = sqlalchemy.create_engine(self._url, poolclass=sqlalchemy.pool.NullPool,
                                          connect_args={"connect_timeout": 10})
        self._conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def _execute(self, sql: str) -> None:
        import sqlalchemy

        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._connect()
        self._conn.execute(sqlalchemy.text(sql), {"key": self._key})

    def __enter__(self) -> "StudyLock":
        if self.enabled:
            try:
                self._execute("SELECT pg_advisory_lock(:key)")
            except Exception:  # a connection dropped while idle (a long trial): one fresh one
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


def make_sampler(s: SearchConfig, offset: int) -> optuna.samplers.BaseSampler:
    """The sampler for the next ask, seeded by the study's trial count: reproducible, and no two
    workers start from the same random stream (which would give them the same params)."""
    if len(s.objectives) == 1:
        return optuna.samplers.TPESampler(seed=s.seed + offset, constant_liar=s.workers > 1)
    return optuna.samplers.NSGAIISampler(seed=s.seed + offset)


def open_study(s: SearchConfig) -> optuna.Study:
    if s.storage.startswith("sqlite:///") and not s.storage.startswith("sqlite:////"):
        Path(s.storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    # optuna >= 4.9 names the stale-trial callback heartbeat_stale_trial_callback (the old name warns)
    takes = inspect.signature(optuna.storages.RDBStorage).parameters
    callback = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in takes else "failed_trial_callback"
    storage = optuna.storages.RDBStorage(
        s.storage, heartbeat_interval=s.heartbeat_s, grace_period=3 * s.heartbeat_s,
        engine_kwargs={} if s.storage.startswith("sqlite") else {"pool_pre_ping": True},
        **{callback: optuna.storages.RetryFailedTrialCallback(max_retry=s.retries)},
    )
    pruner = optuna.pruners.MedianPruner(n_startup_trials=s.pruner_startup_trials) if s.pruning else None
    return optuna.create_study(study_name=s.study, storage=storage, load_if_exists=True, pruner=pruner,
                               directions=list(s.directions), sampler=make_sampler(s, 0))


class Heartbeat:
    """Records the running trial's heartbeat in the storage until stopped."""

    def __init__(self, study: optuna.Study, trial: optuna.Trial, every_s: int):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(study._storage, trial._trial_id, every_s),
                                        name="optuna-heartbeat", daemon=True)

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


def complete(study: optuna.Study) -> list:
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def state_counts(study: optuna.Study) -> dict[str, int]:
    counts = dict.fromkeys(("COMPLETE", "RUNNING", "WAITING", "FAIL", "PRUNED"), 0)
    for t in study.get_trials(deepcopy=False):
        counts[t.state.name] += 1
    return counts


DONE, WAIT = "done", "wait"


def claim_trial(study: optuna.Study, s: SearchConfig, lock: StudyLock):
    """Under the study lock: fail stale trials (queueing their retries), then a trial with its
    params if COMPLETE + RUNNING trials leave room below n_trials; else DONE or WAIT (others'
    running trials fill the quota, and one of them may still fail)."""
    with lock:
        optuna.storages.fail_stale_trials(study)
        n = state_counts(study)
        if n["COMPLETE"] >= s.n_trials:
            return DONE
        if n["COMPLETE"] + n["RUNNING"] >= s.n_trials:
            return WAIT
        study.sampler = make_sampler(s, sum(n.values()))
        trial = study.ask()  # pops a WAITING retry first, else a new trial
        # its first heartbeat before the lock opens: a trial without one is never found stale,
        # so a worker dying right here would otherwise hold its slot forever
        study._storage.record_heartbeat(trial._trial_id)
        return trial, suggest(trial, s)  # the sampler sees every running trial's params


def find_or_open_parent(tracking, study_name: str) -> str:
    """The study's one MLflow parent run: reused when the study resumes."""
    from rlbench.tracking.fingerprint import host_tags
    from rlbench.tracking.record import open_experiment

    exp_id = open_experiment(tracking)
    client = mlflow.MlflowClient()
    found = client.search_runs([exp_id], filter_string=f"tags.optuna_study = '{study_name}' and "
                                                       "tags.`rlbench.role` = 'study'", max_results=1)
    if found:
        return found[0].info.run_id
    run = client.create_run(exp_id, run_name=f"study {study_name}",
                            tags={**host_tags(), "rlbench.role": "study", "optuna_study": study_name})
    return run.info.run_id


def trial_overrides(job: list[str], params: dict, study: str, number: int, parent: str, uri: str) -> list[str]:
    name = " ".join(f"{k}={v}" for k, v in params.items())
    return [*job, *(f"{k}={v}" for k, v in params.items()), f"tracking.uri='{uri}'", f"tracking.parent_run_id={parent}",
            f"tracking.run_name='trial {number}: {name}'", f"+tracking.tags.optuna_study={study}",
            f"+tracking.tags.optuna_trial={number}"]


@contextlib.contextmanager
def pruning_hook(trial: optuna.Trial, s: SearchConfig):
    """While a trial's job runs in this process: report its fps each tick, prune if dominated."""
    from rlbench import job

    if not s.pruning:
        yield
        return
    job.INTERMEDIATE_HOOK = make_reporter(trial)
    try:
        yield
    finally:
        job.INTERMEDIATE_HOOK = None


def make_reporter(trial):
    def report(metrics: dict, step: int) -> None:
        fps = metrics.get("fps")
        if fps is None or not math.isfinite(fps) or step <= 0:
            return
        trial.report(fps, step)
        if trial.should_prune():
            raise JobPruned(f"fps {fps:.0f} at frame {step} is below the pruner's threshold")

    return report


def run_trials(launcher, study: optuna.Study, s: SearchConfig, job: list[str], parent: str, lock: StudyLock,
               tracking_uri: str) -> None:
    """claim -> one real job -> tell, until n_trials are COMPLETE in the study (failures capped)."""
    failures, waiting = 0, False
    while True:
        if failures >= s.max_failures:
            raise SearchError(f"{failures} trials failed in this run (search.max_failures={s.max_failures}); stopping")
        claimed = claim_trial(study, s, lock)
        if claimed == DONE:
            return
        if claimed == WAIT:
            if not waiting:
                print("[rlbench search] the quota is taken by running trials (other workers); waiting", flush=True)
            waiting = True
            time.sleep(min(max(s.heartbeat_s, 1), 10))
            continue
        waiting, (trial, params) = False, claimed
        overrides = trial_overrides(job, params, s.study, trial.number, parent, tracking_uri)
        failures += not run_trial(launcher, study, trial, s, overrides)


def run_trial(launcher, study: optuna.Study, trial: optuna.Trial, s: SearchConfig, overrides: list[str]) -> bool:
    """One trial's job, heartbeating; tells the study its outcome. False when the trial FAILed."""
    print(f"[rlbench search] trial {trial.number} ({len(complete(study))}/{s.n_trials} complete): {trial.params}",
          flush=True)
    try:
        with Heartbeat(study, trial, s.heartbeat_s), pruning_hook(trial, s):
            ret = launcher.launch([overrides], initial_job_idx=trial.number)[0]
    except JobPruned as e:
        print(f"[rlbench search] trial {trial.number} pruned: {e}", flush=True)
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return True
    except KeyboardInterrupt:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    ok = ret.status.name == "COMPLETED"
    values = objective_values(ret.return_value if ok else None, s.objectives)
    if values is None:
        why = ret._return_value if not ok else f"objective {list(s.objectives)} missing or not finite"
        log.error("trial %d FAIL: %s", trial.number, why)
        trial.set_user_attr("fail_reason", str(why)[:500])
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return False
    trial.set_user_attr("run_id", ret.return_value.get("run_id"))
    trial.set_user_attr("cpu_gpu_ratio", ret.return_value.get("cpu_gpu_ratio"))
    study.tell(trial, values)
    return True


def recommend(front: list, directions: list[str]):
    """The front point nearest the utopia point after scaling each objective to [0, 1]."""
    if len(front) == 1:
        return front[0]
    cols = list(zip(*(t.values for t in front)))
    spans = [(min(c), max(c)) for c in cols]

    def regret(t):
        r = 0.0
        for v, (lo, hi), d in zip(t.values, spans, directions):
            x = (v - lo) / (hi - lo) if hi > lo else 0.0
            r += (1 - x if d == "maximize" else x) ** 2
        return r

    return min(front, key=regret)


def recommendation_text(best, front: list, names: list[str]) -> str:
    p = best.params
    vals = ", ".join(f"{n}={v:.4g}" for n, v in zip(names, best.values))
    lines = [f"recommended: actors={p['actors']} actor_threads={p['actor_threads']} sm_limit={p['sm_limit']} "
             f"-> cpu_gpu_ratio={best.user_attrs.get('cpu_gpu_ratio')} ({vals}; trial {best.number})"]
    for t in front:
        if t.number != best.number:
            diffs = ", ".join(f"{n} {100 * (v / b - 1):+.1f}%" for n, v, b in zip(names, t.values, best.values) if b)
            lines.append(f"  front trial {t.number} {t.params}: {diffs} vs recommended")
    return "\n".join(lines)


def report(study: optuna.Study, s: SearchConfig, parent: str, out_dir: Path) -> str | None:
    """Best trial(s), plots and the trials CSV on the parent run; returns the recommendation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as ovm

    client, names = mlflow.MlflowClient(), list(s.objectives)
    out_dir.mkdir(parents=True, exist_ok=True)
    study.trials_dataframe().to_csv(out_dir / "trials.csv", index=False)
    client.log_artifact(parent, str(out_dir / "trials.csv"))
    done = complete(study)
    if not done:
        return None
    front = study.best_trials
    best = recommend(front, list(s.directions))
    for k, v in best.params.items():
        client.set_tag(parent, f"best_{k}", str(v))
    client.set_tag(parent, "best_cpu_gpu_ratio", str(best.user_attrs.get("cpu_gpu_ratio")))
    client.set_tag(parent, "best_trial", str(best.number))
    client.set_tag(parent, "pareto_front_trials", " ".join(str(t.number) for t in front))
    for n, v in zip(names, best.values):
        client.log_metric(parent, f"best_{n}", v)
    plots = {"pareto_front.png": (lambda: ovm.plot_pareto_front(study, target_names=names)) if len(names) > 1
             else (lambda: ovm.plot_optimization_history(study)),
             "param_importances.png": lambda: ovm.plot_param_importances(study, target=lambda t: t.values[0],
                                                                         target_name=names[0]),
             "slice.png": lambda: ovm.plot_slice(study, target=lambda t: t.values[0], target_name=names[0])}
    for fname, draw in plots.items():
        try:
            draw()
            plt.gcf().savefig(out_dir / fname, dpi=80, bbox_inches="tight")
            client.log_artifact(parent, str(out_dir / fname))
        except Exception as e:  # e.g. importances need 2+ complete trials with varied params
            log.warning("no %s: %s", fname, e)
            client.set_tag(parent, f"null/{fname}", str(e)[:500])
        finally:
            plt.close("all")
    return recommendation_text(best, front, names)


def run_search(sweeper, arguments: list[str]) -> None:
    """The sweeper's entry when `search` is configured (see the module docstring)."""
    import tempfile

    from rlbench.resources import ComputeLimit
    from rlbench.sweep import expand_jobs, preflight_or_exit, validate_jobs
    from rlbench.tracking.record import mark_stale_runs
    from rlbench.trainer import resolve_device

    jobs = expand_jobs(sweeper, arguments)
    if len(jobs) != 1:
        _refuse([f"search= with a grid ({len(jobs)} jobs): give single values; the search picks actors, "
                 "actor_threads and sm_limit"])
    conf = validate_jobs(sweeper, jobs)[0]
    s = conf.search
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    in_process = isinstance(sweeper.launcher, BasicLauncher)
    _refuse(check_space(s, ComputeLimit(None, resolve_device(conf.device)).grant.total) + _energy_check(conf)
            + ([] if in_process or not s.pruning else
               ["search.pruning=true needs jobs in this process (the basic launcher), not "
                f"{type(sweeper.launcher).__name__}"]))
    preflight_or_exit(conf.tracking.uri, s.storage)
    lock = StudyLock(s.storage, s.study)
    with lock:  # workers starting together: one creates the tables, the study and the parent run
        study = open_study(s)
        failed_before = state_counts(study)["FAIL"]
        optuna.storages.fail_stale_trials(study)
        stale = state_counts(study)["FAIL"] - failed_before
        mark_stale_runs(conf.tracking)
        parent = find_or_open_parent(conf.tracking, s.study)
        mlflow.MlflowClient().update_run(parent, status="RUNNING")
    print(f"[rlbench search] study '{s.study}' in {masked(s.storage)}: {len(complete(study))}/{s.n_trials} complete"
          + (f"; {stale} stale trial(s) failed" if stale else ""), flush=True)
    status = "FAILED"
    try:
        run_trials(sweeper.launcher, study, s, jobs[0], parent, lock, conf.tracking.uri)
        status = "FINISHED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        with tempfile.TemporaryDirectory() as tmp:
            text = report(study, s, parent, Path(tmp))
        mlflow.MlflowClient().set_terminated(parent, status)
        lock.close()
        print(f"[rlbench search] parent run {parent} {status}\n{text or 'no COMPLETE trial yet'}", flush=True)


def _energy_check(conf) -> list[str]:
    """Energy objectives need a measured (or explicitly estimated) energy on this host."""
    if not any(k.startswith(("energy", "perf_per_watt", "joules")) for k in conf.search.objectives):
        return []
    from rlbench.telemetry.nvml import NvmlSource
    from rlbench.telemetry.rapl import RaplSource

    gpu, cpu = NvmlSource(), RaplSource()
    try:
        if gpu.available or cpu.available or conf.telemetry.cpu_tdp_w:
            return []
        return [f"search.objectives={list(conf.search.objectives)}: no energy can be measured here (GPU: "
                f"{gpu.reason}; CPU: {cpu.reason}); set telemetry.cpu_tdp_w=<watts> for a labelled estimate, "
                "or search.objectives=[fps] search.directions=[maximize]"]
    finally:
        gpu.close()


def _refuse(problems: list[str]) -> None:
    if problems:
        print("rlbench: search not started:\n  " + "\n  ".join(problems), file=sys.stderr)
        sys.exit(2)
