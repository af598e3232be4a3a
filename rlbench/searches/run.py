"""The search's run (the sweeper's entry when `search` is set): Optuna >= 4 through ask/tell;
every trial is one real rlbench job, its MLflow run a child of the study's parent run. The study
resumes from `search.storage`, and workers share it, taking trials under its lock until exactly
`search.n_trials` are COMPLETE. docs/scale-out.md, "The search's workers, inside"."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import optuna

from rlbench.core.errors import Refusal
from rlbench.core.resources import ComputeLimit, resolve_device
from rlbench.core.verdict import DEFAULT_METRIC
from rlbench.prepare.grid import expand_jobs, in_process, repeat_seeds, validate_jobs
from rlbench.prepare.preflight import check, masked
from rlbench.prepare.validate import validate
from rlbench.searches.parent import ran_knobs, recommend, report, study_params, study_parent, trial_rows
from rlbench.searches.space import (
    KNOBS,
    SearchError,
    check_space,
    default_objectives,
    granted_space,
    host_meters,
    objective_checks,
    objective_labels,
)
from rlbench.searches.study import (
    StudyLock,
    complete,
    fail_gone_trials,
    open_study,
    quiet_optuna,
    state_counts,
)
from rlbench.searches.trials import run_trials
from rlbench.searches.warm_start import enqueue, load_machine, note, record
from rlbench.tracking.experiment import Experiment
from rlbench.tracking.parent import live
from rlbench.tracking.store import ui_hint, use_store
from rlbench.tracking.views import VERDICT_TAG


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What a search returns (the Python API's rlbench.search): its parent run, how it ended, the
    study, each trial's rows (search/parent.py trial_rows: a trial's runs with their knobs and
    headline numbers), the recommended trial's knobs as it ran them, by the command line's names
    (parent.py ran_knobs: actors, actor_threads, sm_limit; None before a COMPLETE trial), and the store."""

    parent_run_id: str
    status: str
    study: str
    storage: str
    rows: list[dict]
    best: dict | None
    tracking_uri: str
    experiment_id: str


def search_result(study, search, parent, status: str, experiment) -> SearchResult:
    done = complete(study)
    best = ran_knobs(recommend(study.best_trials, list(search.directions))) if done else None
    return SearchResult(
        parent.run_id,
        status,
        search.study,
        search.storage,
        trial_rows(study),
        best,
        experiment.tracking.uri,
        experiment.id,
    )


def run_search(sweeper, arguments: list[str], store=Experiment) -> SearchResult:
    """The sweeper's entry when `search` is configured (see the module docstring); store: opens
    the tracking port on the job's TrackingConfig."""

    jobs = expand_jobs(sweeper, arguments)
    if len(jobs) != 1:
        _refuse(
            [
                (
                    f"search= with a grid ({len(jobs)} jobs): give single values; the search picks actors, "
                    "actor_threads and sm_limit"
                )
            ]
        )
    conf = validate_jobs(sweeper, jobs)[0]
    search = conf.search

    jobs_here = in_process(sweeper.launcher)
    meters = host_meters()
    if not search.objectives:  # the defaults: the task's time, and its energy where a job here gets it
        search.objectives, search.directions, left_out = default_objectives(conf, meters)
        if left_out:
            print(f"[rlbench search] {left_out}", flush=True)
    _refuse(
        check_space(search, ComputeLimit(None, resolve_device(conf.device)).grant.total)
        + objective_checks(conf, meters)
        + (
            []
            if jobs_here or not search.pruning
            else [
                (
                    "search.pruning=true needs jobs in this process (the basic launcher), not "
                    f"{type(sweeper.launcher).__name__}"
                )
            ]
        )
    )
    narrowed = granted_space(search, conf)
    if narrowed:
        print(f"[rlbench search] {narrowed}", flush=True)
    seeds = repeat_seeds(search.repeats, conf.seed) if search.repeats > 1 else None  # as a sweep's repeats
    check(conf.tracking.uri, search.storage)  # PreflightError: a refusal in one line, exit 2
    machine = _warm_start_machine(conf) if search.warm_start_profile else None
    experiment = store(conf.tracking)  # the store the trials record into, before anything reads it
    if experiment.unwritable:
        _refuse([experiment.unwritable])
    lock = StudyLock(search.storage, search.study)
    with lock:  # workers starting together: one creates the tables, the study and the parent run
        study = open_study(search)
        failed_before = state_counts(study)["FAIL"]
        killed = experiment.mark_stale_runs()  # in every experiment of the store: a killed worker's trial run too
        fail_gone_trials(
            study, experiment.trial_numbers(killed, search.study), search.retries
        )  # no wait for its heartbeat
        with quiet_optuna():
            optuna.storages.fail_stale_trials(study)
        stale = state_counts(study)["FAIL"] - failed_before
        parent = study_parent(
            experiment, search.study, f"{conf.env.id} {conf.algo.name}", study_params(search, jobs[0])
        )
        if machine is not None:
            _warm_start(sweeper, study, search, jobs[0], machine, parent, conf.workload.frames)
    print(
        f"[rlbench search] study '{search.study}' in {masked(search.storage)}: "
        f"{len(complete(study))}/{search.n_trials} complete" + (f"; {stale} stale trial(s) failed" if stale else ""),
        flush=True,
    )
    labels = objective_labels(conf, meters)
    parent.set_tags({"objectives": ", ".join(f"{lab} ({d})" for lab, d in zip(labels, search.directions, strict=True))})
    status = run_study(
        sweeper.launcher,
        study,
        search,
        jobs[0],
        experiment,
        parent,
        lock,
        labels,
        seeds=seeds,
        judging=(conf.verdict.metric, conf.verdict.noise_floor_min),
    )
    return search_result(study, search, parent, status, experiment)


def run_study(
    launcher,
    study: optuna.Study,
    search,
    job: list[str],
    experiment,
    parent,
    lock: StudyLock,
    labels: list[str] | None = None,
    seeds: list[str] | None = None,
    judging: tuple[str, float] = (DEFAULT_METRIC, 0.0),
) -> str:
    """The trials until the study has search.n_trials COMPLETE, in the parent's life (tracking/parent.py):
    it ends FINISHED, FAILED (too many trials failed) or KILLED, with the report on it whatever
    happened; the lock's connection is closed. Returns the parent's status. seeds: each trial's
    runs' (search.repeats); judging: the verdict's settings (parent.py report)."""

    def trials() -> str:
        run_trials(launcher, study, search, job, parent.run_id, lock, experiment.tracking.uri, seeds)
        return "FINISHED"

    def close(status: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            text = report(study, search, parent, experiment, Path(tmp), labels, judging)
        lock.close()
        view = _search_view(experiment, parent.run_id, search)
        print(
            f"[rlbench search] parent run {parent.run_id} {status}\n{text or 'no COMPLETE trial yet'}\n"
            f"[rlbench search] {ui_hint(experiment.tracking.uri, experiment.id, view, experiment.tracking.ui_port)}",
            flush=True,
        )

    return live(parent, trials, close, "study parent")


def _search_view(experiment, parent: str, search) -> str | None:
    """The runs table's shared view of the trials: the searched knobs (search/space.py suggest)
    and the headline numbers, energy when the study minimises it (the search refuses an energy
    objective that cannot be measured), and each COMPLETE trial's verdict (parent.py mark_verdicts)."""
    measured = {"runtime_s", "task_fps", "fps", "actor_threads_used", "sm_granted", "cpu_gpu_ratio"} | (
        {"energy_per_task_j"} & set(search.objectives)
    )  # the knobs as the jobs ran them beside the asked ones
    try:
        return experiment.share_runs_view(parent, list(KNOBS), measured, tags=(VERDICT_TAG,))
    except Exception as e:  # noqa: BLE001 - the trials' record stands without it
        print(f"[rlbench search] could not store the runs table's view: {e}", flush=True)
        return None


def _warm_start_machine(conf):

    use_store(conf.tracking.uri)
    try:
        return load_machine(conf.search)
    except SearchError as e:
        _refuse([str(e)])


def _warm_start(sweeper, study, search, job: list[str], machine, parent: str, frames: int) -> None:
    """Enqueue the predicted best configurations (a new study only) and record them."""

    loader = sweeper.hydra_context.config_loader

    def compose(overrides: list[str]):
        return validate(loader.load_sweep_config(master_config=sweeper.config, sweep_overrides=overrides), host=False)

    try:
        rows, unused = enqueue(study, search, job, machine, compose, frames)
    except SearchError as e:
        _refuse([str(e)])
    if rows:
        record(parent, search, machine, rows, unused)
        print(
            f"[rlbench search] {note(search, machine, rows, unused)}\n  "
            + "\n  ".join(
                f"trial {r['trial']}: actors={r['actors']} actor_threads={r['actor_threads']} "
                f"sm_limit={r['sm_limit']} (predicted {r['predicted_fps']:.0f} fps, "
                f"{r['predicted_runtime_s']:.1f} s, bound by {r['predicted_bound']})"
                for r in rows
            ),
            flush=True,
        )


def _refuse(problems: list[str]) -> None:
    """A Refusal (exit 2) naming every problem, if there is one."""
    if problems:
        raise Refusal("search not started:\n  " + "\n  ".join(problems))
