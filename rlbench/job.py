"""One rlbench job as a plain function: validate, open the MLflow run, train, record.

`run_job(cfg)` is what the Hydra entry point calls and what tests call with a config from
compose(). Validation happens first: a bad config raises ConfigError before any run,
environment or thread exists.
"""

from __future__ import annotations

import logging
import math
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from rlbench import preflight
from rlbench.algo import config_module
from rlbench.bound import bottleneck
from rlbench.config.schema import Config
from rlbench.config.validate import validate
from rlbench.envs.vector import actor_hardware_threads, job_inference_batch
from rlbench.resources import ComputeLimit, resolve_device
from rlbench.signals import sigterm_raises
from rlbench.telemetry.charts.operations import as_columns, op_breakdown_rows, plot_op_breakdown
from rlbench.telemetry.job_telemetry import JobTelemetry
from rlbench.tracking.dataset import env_dataset
from rlbench.tracking.job_note import job_note
from rlbench.tracking.parent import NOTE_TAG
from rlbench.tracking.record import JobRecord, param_names
from rlbench.tracking.store import config_hash, mark_stale_runs, open_experiment
from rlbench.tracking.views import BOUND_TAG, HEADLINE, job_view, knobs_of, not_measured
from rlbench.trainer import last_returns_mean, train

log = logging.getLogger(__name__)


def _log_telemetry_artifacts(record: JobRecord, telemetry: JobTelemetry, output_dir: Path | None, plot: bool) -> None:
    """telemetry.csv and .png into the run (also for a failed job); never masks its outcome."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = (output_dir or Path(tmp)) / "telemetry"
            record.log_artifacts(telemetry.artifacts(folder, plot), "telemetry")
    except Exception as e:  # noqa: BLE001 - artifacts never mask the job's outcome
        log.warning("could not log telemetry artifacts: %s", e)


def _log_operations(record: JobRecord, final: dict, walls: dict, output_dir: Path | None) -> None:
    """The op_frac metrics as a table (operations.json) and a bar chart (operations.png)."""
    rows = op_breakdown_rows(final, walls)
    if not rows:
        return
    try:
        record.log_table(as_columns(rows), "operations.json")
        with tempfile.TemporaryDirectory() as tmp:
            path = plot_op_breakdown(rows, (output_dir or Path(tmp)) / "operations.png",
                                     f"time per operation, {record.run.info.run_name}")
            record.log_artifacts([path])
    except Exception as e:  # noqa: BLE001 - artifacts never mask the job's outcome
        log.warning("could not log the operations table and chart: %s", e)


def _noting(log_metrics, names: set[str]):
    def log(metrics: dict, step: int) -> None:
        names.update(metrics)
        log_metrics(metrics, step)

    return log


def _record_final(record: JobRecord, final: dict, ticked: set[str], conf: Config, overrides: list[str],
                  timeline: bool) -> str:
    """The final values where MLflow draws them comparably: a value only the end knows at step 0
    (a bar in the UI's charts, one per run), a series' last value at the step after its last
    tick (steps are seconds since the task started). Tags: the bound, a headline metric the job
    could not measure as "not measured: why"; the job's chart view; its description. Returns
    the bound in words."""
    last = math.ceil(final["runtime_s"])
    record.log_metrics({k: v for k, v in final.items() if k not in ticked}, step=0)
    record.log_metrics({k: v for k, v in final.items() if k in ticked}, step=last)
    bound = bottleneck(final)
    tags = {BOUND_TAG: f"{bound.kind} {bound.share:.0%}" if bound.share is not None else bound.kind}
    measured = {m for m in HEADLINE if final.get(m) is not None and math.isfinite(final[m])}
    tags |= {m: not_measured(m, record.unmeasured) for m in HEADLINE if m not in measured}
    charts = None
    try:
        charts = job_view(record.run.info.experiment_id, record.run_id,
                          knobs_of([overrides], param_names(conf), varying=False), measured)
    except Exception as e:  # noqa: BLE001 - the job's record stands without it
        log.warning("could not store the job's chart view: %s", e)
    record.set_tags(tags | {NOTE_TAG: job_note(final, conf.env.id, record.unmeasured, timeline, charts)})
    return tags[BOUND_TAG]


def _with_tick(log_metrics, on_tick):
    if on_tick is None:
        return log_metrics

    def log(metrics: dict, step: int) -> None:
        log_metrics(metrics, step)
        on_tick(metrics, step)

    return log


def run_job(cfg: DictConfig, overrides: list[str] | None = None, output_dir: Path | None = None,
            conf: Config | None = None, on_tick=None) -> dict:
    """conf: validate(cfg), when the caller has already validated it. on_tick(metrics, step): called after each
    tick's metrics are logged (an in-process search's pruning reporter; it may raise JobPruned)."""
    conf = conf if conf is not None else validate(cfg)
    cfg.workload.learner_updates = conf.workload.learner_updates  # resolved (null: from the replay ratio)
    device = resolve_device(conf.device)
    compute = ComputeLimit(conf.sm_limit, device, conf.sm_backend)  # refuses before any run exists
    threads = actor_hardware_threads(conf.env.kind, conf.actor_threads)
    ratio = compute.grant.metrics(threads)  # logged once, at the start: a failed job has them too
    tags = {"device": str(device), "env_id": conf.env.id, "compute_unit": compute.grant.compute_unit,
            "sm_backend_used": compute.grant.backend,  # the param sm_backend is what was asked for
            "inference_batch_used": str(job_inference_batch(conf)),  # envs per forward; the param is what was asked
            "config_hash": config_hash(conf)}
    returns: list[tuple[float, int]] = []
    walls: dict[str, float] = {}
    ticked: set[str] = set()  # the names logged as series
    eval_returns: list[tuple[float, int]] = []
    single = conf.tracking.parent_run_id is None  # else its sweep did the checks once for all its jobs
    if single:
        preflight.check(conf.tracking.uri)  # raises PreflightError (exit 2) before any run exists
    open_experiment(conf.tracking)
    if single:
        mark_stale_runs(conf.tracking)
    with (sigterm_raises(), JobRecord(cfg, conf.tracking, overrides or [], output_dir, tags, env_dataset(conf.env))
          as record, compute):
        record.log_metrics(ratio, step=0)
        log.info("MLflow run %s (%s): %s on %s, cpu_gpu_ratio %.3g (%d actor threads / %d %ss), "
                 "inference_batch_used %s", record.run_id, conf.tracking.uri, conf.env.id, device,
                 ratio["cpu_gpu_ratio"], threads, compute.grant.granted, compute.grant.compute_unit,
                 tags["inference_batch_used"])
        telemetry = JobTelemetry(conf.telemetry, device) if conf.telemetry.enabled else None
        try:
            final = train(conf, _with_tick(_noting(record.log_metrics, ticked), on_tick),
                          on_episode=lambda r, f: returns.append((r, f)),
                          telemetry=telemetry, set_tags=record.set_tags, compute=compute,
                          on_eval_episode=lambda r, f: eval_returns.append((r, f)), on_walls=walls.update)
        finally:
            record.log_series("episode_return", returns)
            record.log_series("eval_return", eval_returns)
            if telemetry is not None and telemetry.started is not None:
                _log_telemetry_artifacts(record, telemetry, output_dir, conf.telemetry.plot)
        final["episode_return_mean20"] = last_returns_mean([r for r, _ in returns], 20)
        final["eval_return_mean20"] = last_returns_mean([r for r, _ in eval_returns], 20)
        if not eval_returns:
            record.set_unmeasured({"eval_return_mean20": "eval_envs=0" if not conf.eval_envs else
                                   "no evaluation episode ended within the task"})
        replay_ratio = config_module(conf.algo.name).task_replay_ratio(conf)
        if replay_ratio is not None:  # None: the algorithm has no learner (algo=random)
            final["task_replay_ratio"] = replay_ratio
        if any(final.get(k) != v for k, v in ratio.items()):
            log.warning("compute grant changed during the job: %s at the start, %s at the end", ratio,
                        {k: final.get(k) for k in ratio})
        timeline = telemetry is not None and conf.telemetry.trace_window_s > 0
        final["bound"] = _record_final(record, {k: v for k, v in final.items() if k not in ratio}, ticked, conf,
                                       overrides or [], timeline)
        _log_operations(record, final, walls, output_dir)
        final["run_id"] = record.run_id
        final["unmeasured"] = dict(record.unmeasured)  # the sweep's table says why a value is missing
    log.info("done: runtime_s=%.1f fps=%.0f sps=%.0f", final["runtime_s"], final["fps"], final["sps"])
    return final
