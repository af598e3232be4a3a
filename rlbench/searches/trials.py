"""One worker's loop: claim a trial, run its real job through the Hydra launcher (heartbeating,
optionally pruned on intermediate fps by a Pruner observing it), tell the study the outcome (docs/scale-out.md)."""

from __future__ import annotations

import logging
import math
import statistics
import time

import optuna

from rlbench.config.schema import SearchConfig
from rlbench.core.observers import JobObserver
from rlbench.core.signals import JobPruned
from rlbench.core.verdict import RECORDED
from rlbench.prepare.hydra_private import failure
from rlbench.prepare.job import handing
from rlbench.searches.space import SearchError, knob_text, objective_values
from rlbench.searches.study import DONE, WAIT, Heartbeat, StudyLock, claim_trial, complete
from rlbench.tracking.parent_note import TABLE_METRICS

log = logging.getLogger(__name__)


def trial_overrides(job: list[str], params: dict, study: str, number: int, parent: str, uri: str) -> list[str]:
    """A trial's job: the search's line, the trial's knobs, its parent, store and study; its run
    named `trial 4: actors=8 actor_threads=1 sm_limit=2`, as asked (the parent's trial_label
    names a COMPLETE trial so too where its jobs ran what was asked)."""
    name = knob_text(params)
    return [
        *job,
        *(f"{k}={v}" for k, v in params.items()),
        f"tracking.uri='{uri}'",
        f"tracking.parent_run_id={parent}",
        f"tracking.run_name='trial {number}: {name}'",
        f"+tracking.tags.optuna_study={study}",
        f"+tracking.tags.optuna_trial={number}",
    ]


class Pruner(JobObserver):
    """A trial's pruner as an observer of its first job: each tick's fps reported to the trial,
    the job stopped (JobPruned: its run ends KILLED) once the pruner says the trial is dominated."""

    def __init__(self, trial):
        self.trial = trial

    def tick(self, metrics: dict, step: int) -> None:
        fps = metrics.get("window/fps")  # the tick's actor rate
        if fps is None or not math.isfinite(fps) or step <= 0:
            return
        self.trial.report(fps, step)
        if self.trial.should_prune():
            raise JobPruned(f"window/fps {fps:.0f} at {step} s is below the pruner's threshold")


def run_trials(
    launcher,
    study: optuna.Study,
    search: SearchConfig,
    job: list[str],
    parent: str,
    lock: StudyLock,
    tracking_uri: str,
    seeds: list[str] | None = None,
) -> None:
    """claim -> the trial's real jobs (one per seed: search.repeats) -> tell, until n_trials are
    COMPLETE in the study (failures capped). seeds: the repeats' (grid.repeat_seeds); None or one:
    the job's own seed."""
    failures, waiting = 0, False
    while True:
        if failures >= search.max_failures:
            raise SearchError(
                f"{failures} trials failed in this run (search.max_failures={search.max_failures}); stopping"
            )
        claimed = claim_trial(study, search, lock)
        if claimed == DONE:
            return
        if claimed == WAIT:
            if not waiting:
                print("[rlbench search] the quota is taken by running trials (other workers); waiting", flush=True)
            waiting = True
            time.sleep(min(max(search.heartbeat_s, 1), 10))
            continue
        waiting, (trial, params) = False, claimed
        overrides = trial_overrides(job, params, search.study, trial.number, parent, tracking_uri)
        failures += not run_trial(launcher, study, trial, search, repeat_overrides(overrides, seeds))


def repeat_overrides(overrides: list[str], seeds: list[str] | None) -> list[list[str]]:
    """A trial's jobs: one per repeat, each naming its seed as a sweep's repeats do; one seed: one job as given."""
    if not seeds or len(seeds) < 2:
        return [overrides]
    own = [o for o in overrides if not o.startswith("seed=")]  # the repeats' seeds replace the job's
    return [[*own, f"seed={seed}"] for seed in seeds]


RAN = ("actor_threads_used", "sm_granted", "cpu_gpu_ratio", "compute_unit")  # the knobs as a job ran them


def run_record(value: dict, objectives: list[str]) -> dict:
    """What the study keeps of one finished job of a trial: its run, its objectives and the
    verdict's metrics (core/verdict.py RECORDED), the knobs as it ran (None: not logged)."""
    keep = {*objectives, *RECORDED, *TABLE_METRICS}
    numbers = {m: float(v) for m in keep if isinstance(v := value.get(m), int | float) and math.isfinite(v)}
    return {
        "run_id": value.get("run_id"),
        **numbers,
        **{k: value.get(k) for k in RAN},
        **({"bound": str(value["bound"])} if value.get("bound") else {}),
    }


def headline(values: dict) -> dict:
    """A trial job's headline numbers for the parent's jobs table (its finite ones) and its bound."""
    out = {
        m: float(values[m])
        for m in TABLE_METRICS
        if isinstance(values.get(m), int | float) and math.isfinite(values[m])
    }
    return out | ({"bound": str(values["bound"])} if values.get("bound") else {})


def launch_repeats(launcher, trial: optuna.Trial, search: SearchConfig, jobs: list[list[str]]) -> list:
    """The trial's jobs one after another, launched by Hydra; with search.pruning the first one
    is watched by the trial's Pruner (a second repeat would report the same steps again)."""
    rets = []
    for k, overrides in enumerate(jobs):
        with handing(observers=[Pruner(trial)] if search.pruning and k == 0 else []):
            rets += launcher.launch([overrides], initial_job_idx=trial.number * len(jobs) + k)
    return rets


def run_trial(launcher, study: optuna.Study, trial: optuna.Trial, search: SearchConfig, jobs: list[list[str]]) -> bool:
    """A trial's jobs (its repeats), heartbeating; tells the study its outcome, the median of
    its finished jobs' objectives. False when the trial FAILed (no job gave its objectives)."""
    print(
        f"[rlbench search] trial {trial.number} ({len(complete(study))}/{search.n_trials} complete): {trial.params}"
        + (f", {len(jobs)} runs" if len(jobs) > 1 else ""),
        flush=True,
    )
    try:
        with Heartbeat(study, trial, search.heartbeat_s):
            rets = launch_repeats(launcher, trial, search, jobs)
    except JobPruned as e:
        print(f"[rlbench search] trial {trial.number} pruned: {e}", flush=True)
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return True
    except KeyboardInterrupt:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise
    done, why = [], []
    for ret in rets:
        ok = ret.status.name == "COMPLETED"
        if objective_values(ret.return_value if ok else None, search.objectives) is None:
            why.append(failure(ret) if not ok else f"objective {list(search.objectives)} missing or not finite")
        else:
            done.append(ret.return_value)
    if not done:
        log.error("trial %d FAIL: %s", trial.number, why[0])
        trial.set_user_attr("fail_reason", str(why[0])[:500])
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return False
    tell_median(study, trial, search, done, [str(w)[:200] for w in why])
    return True


def tell_median(
    study: optuna.Study, trial: optuna.Trial, search: SearchConfig, done: list[dict], failed: list[str]
) -> None:
    """The trial's value: per objective, the median of its finished jobs; its runs kept beside."""
    runs = [run_record(v, list(search.objectives)) for v in done]
    first = done[0]
    trial.set_user_attr("run_id", first.get("run_id"))
    trial.set_user_attr("run_ids", [r["run_id"] for r in runs])
    trial.set_user_attr("runs", runs)
    trial.set_user_attr("ran", {k: first.get(k) for k in RAN})
    trial.set_user_attr("cpu_gpu_ratio", first.get("cpu_gpu_ratio"))
    trial.set_user_attr("headline", headline(first) if len(done) == 1 else median_headline(done))
    if failed:
        trial.set_user_attr("failed_runs", failed)
    study.tell(
        trial,
        [
            statistics.median(objective_values(v, search.objectives)[i] for v in done)
            for i in range(len(search.objectives))
        ],
    )


def median_headline(done: list[dict]) -> dict:
    """The headline numbers of several runs: each the median of the runs that have it; the bound when they share one."""
    heads = [headline(v) for v in done]
    out = {m: statistics.median(xs) for m in TABLE_METRICS if (xs := [h[m] for h in heads if m in h])}
    bounds = {h.get("bound") for h in heads}
    return out | ({"bound": bounds.pop()} if len(bounds) == 1 and None not in bounds else {})
