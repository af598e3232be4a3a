"""One rlbench job as a plain function: plan, open the MLflow run, train, record.

`run_job(job, observers)` is how every job starts (a single run, a sweep's, a search trial's,
the study's, the tests'): a limit this host cannot honour (ResourceError) or an
unusable store is refused before any run exists; the trainer then tells the job's observers
of its life (docs/jobs.md, "A job's observers")."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence

import torch

from rlbench.config.rules import ConfigError
from rlbench.core.observers import JobObserver
from rlbench.core.progress import Progress
from rlbench.core.signals import STOP_BOUND_S, sigterm_raises
from rlbench.prepare import preflight
from rlbench.prepare.job import Job
from rlbench.prepare.packing import cpus_text, gpu_sharing, parse_cpus
from rlbench.prepare.plan import JobPlan, plan_job
from rlbench.telemetry.job_telemetry import JobTelemetry
from rlbench.telemetry.timing import OpTimer
from rlbench.tracking.dataset import env_dataset
from rlbench.tracking.record import JobRecord
from rlbench.tracking.store import artifact_problem, config_hash, mark_stale_runs, open_experiment
from rlbench.train.recording import RecordObserver
from rlbench.train.steady import SteadyRates
from rlbench.train.trainer import train

log = logging.getLogger(__name__)


def run_job(job: Job, observers: Sequence[JobObserver] = ()) -> dict:
    """The job's record and its task, watched by the record, the telemetry, the steady rates, the
    progress lines and then `observers` (a search trial's pruner). Its config is never changed:
    the plan and the record read the one frozen config of `job` (rlbench/prepare/job.py). A pack's
    job runs confined to its CPUs (before its plan counts them), the process's own given back after."""
    with confined(job.config) as packed:
        return _run_job(job, observers, packed)


def _run_job(job: Job, observers: Sequence[JobObserver], packed: dict[str, str]) -> dict:
    conf = job.config
    plan = plan_job(conf, job.placement)  # refuses a limit this host cannot honour before any run exists
    single = conf.tracking.parent_run_id is None  # else its sweep did the checks once for all its jobs
    if single:
        preflight.check(conf.tracking.uri)  # raises PreflightError (exit 2) before any run exists
    unwritable = artifact_problem(conf.tracking)
    if unwritable:  # the record would be incomplete: refused before any run exists
        raise ConfigError(unwritable)
    open_experiment(conf.tracking)
    if single:
        mark_stale_runs(conf.tracking)
    tags = plan.tags() | {"config_hash": config_hash(conf)} | packed
    bound = STOP_BOUND_S if single else None  # a single job ends this long after a SIGTERM; a sweep's, its sweep
    overrides = list(job.overrides)
    with (
        sigterm_raises(bound),
        JobRecord(conf, overrides, job.output_dir, tags, env_dataset(conf.env, plan.family)) as record,
    ):
        start = plan.grant_metrics()
        record.log_metrics(start, step=0)  # at the start: a failed job has them too
        _log_start(record.run_id, plan, start)
        telemetry = JobTelemetry(conf.telemetry, plan.device) if conf.telemetry.enabled else None
        recorder = RecordObserver(record, conf, overrides, job.output_dir, start, telemetry)
        progress = Progress(conf.workload.frames, plan.learner_updates, conf.progress)
        steady = SteadyRates(conf.tracking.steady_min_windows, telemetry)
        watchers = [recorder, telemetry, steady, progress, *observers]
        result = train(plan, watchers, telemetry.timer if telemetry is not None else OpTimer)
        result |= {
            "bound": recorder.bound,
            "run_id": record.run_id,
            "compute_unit": plan.compute.grant.compute_unit,
            "unmeasured": dict(record.unmeasured),
        }  # the sweep's table says why a value is missing
    log.info("done: runtime_s=%.1f fps=%.0f sps=%.0f", result["runtime_s"], result["fps"], result["sps"])
    return result


@contextlib.contextmanager
def confined(conf) -> Iterator[dict[str, str]]:
    """A pack's job (packing.id set by the sweep): this process confined to its share of the CPUs
    (its actor threads, pinned or not, and torch's threads then count and use those only) while
    it runs, then given its CPUs and threads back (a launcher's process runs other jobs after);
    yields the record's pack tags, {} for a job alone."""
    if conf.packing.id is None:
        yield {}
        return
    cpus, before, threads = parse_cpus(conf.packing.cpus), os.sched_getaffinity(0), torch.get_num_threads()
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))  # torch's intra-op threads on the share (a CPU grant sets them again)
    try:
        yield pack_tags(conf)
    finally:
        os.sched_setaffinity(0, before)
        torch.set_num_threads(threads)


def pack_tags(conf) -> dict[str, str]:
    return {
        "pack_id": conf.packing.id,
        "pack": str(conf.pack),
        "pack_index": str(conf.packing.index),
        "pack_cpus": cpus_text(sorted(os.sched_getaffinity(0))),  # as the process has them, read back
        "gpu_sharing": gpu_sharing(conf, torch.cuda.is_available() and not conf.device.startswith("cpu")),
    }


def _log_start(run_id: str, plan: JobPlan, start: dict) -> None:
    conf, grant = plan.conf, plan.compute.grant
    ratio = (
        f"cpu_gpu_ratio {start['cpu_gpu_ratio']:.3g} ({plan.envs.actor_threads} actor threads"
        if "cpu_gpu_ratio" in start
        else "cpu_gpu_ratio once the actor processes joined (their threads"
    )
    log.info(
        "MLflow run %s (%s): %s on %s, %s / %d %ss), inference_batch_used %d",
        run_id,
        conf.tracking.uri,
        conf.env.id,
        plan.device,
        ratio,
        grant.granted,
        grant.compute_unit,
        plan.envs.inference_batch,
    )
