"""One worker's loop: claim a trial, run its real job through the Hydra launcher (heartbeating,
optionally pruned on intermediate fps), tell the study the outcome (docs/scale-out.md)."""

from __future__ import annotations

import copy
import functools
import logging
import math
import time

import optuna

from rlbench.config.schema import SearchConfig
from rlbench.core.signals import JobPruned
from rlbench.search.space import SearchError, objective_values
from rlbench.search.study import DONE, WAIT, Heartbeat, StudyLock, claim_trial, complete
from rlbench.tracking.parent_note import TABLE_METRICS

log = logging.getLogger(__name__)

def trial_overrides(job: list[str], params: dict, study: str, number: int, parent: str, uri: str) -> list[str]:
    name = " ".join(f"{k}={v}" for k, v in params.items())
    return [*job, *(f"{k}={v}" for k, v in params.items()), f"tracking.uri='{uri}'", f"tracking.parent_run_id={parent}",
            f"tracking.run_name='trial {number}: {name}'", f"+tracking.tags.optuna_study={study}",
            f"+tracking.tags.optuna_trial={number}"]


def trial_launcher(launcher, trial: optuna.Trial, s: SearchConfig):
    """The launcher for a trial's job: with pruning (jobs in this process), a copy whose task reports the job's
    fps to the trial each tick (run_job's on_tick) and prunes it if dominated."""
    if not s.pruning:
        return launcher
    bound = copy.copy(launcher)
    bound.task_function = functools.partial(launcher.task_function, on_tick=make_reporter(trial))
    return bound


def make_reporter(trial):
    def report(metrics: dict, step: int) -> None:
        fps = metrics.get("window/fps")  # the tick's actor rate
        if fps is None or not math.isfinite(fps) or step <= 0:
            return
        trial.report(fps, step)
        if trial.should_prune():
            raise JobPruned(f"window/fps {fps:.0f} at {step} s is below the pruner's threshold")

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


def headline(values: dict) -> dict:
    """A trial job's headline numbers for the parent's jobs table (its finite ones) and its bound."""
    out = {m: float(values[m]) for m in TABLE_METRICS
           if isinstance(values.get(m), int | float) and math.isfinite(values[m])}
    return out | ({"bound": str(values["bound"])} if values.get("bound") else {})


def run_trial(launcher, study: optuna.Study, trial: optuna.Trial, s: SearchConfig, overrides: list[str]) -> bool:
    """One trial's job, heartbeating; tells the study its outcome. False when the trial FAILed."""
    print(f"[rlbench search] trial {trial.number} ({len(complete(study))}/{s.n_trials} complete): {trial.params}",
          flush=True)
    try:
        with Heartbeat(study, trial, s.heartbeat_s):
            ret = trial_launcher(launcher, trial, s).launch([overrides], initial_job_idx=trial.number)[0]
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
    trial.set_user_attr("headline", headline(ret.return_value))
    study.tell(trial, values)
    return True
