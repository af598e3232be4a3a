"""A job's MLflow record as an observer of its life (rlbench/core/observers.py): ticks as series,
episodes as `episode_return` and `eval_return`, the final values, tags, the chart view,
description and operations table; an artifact that cannot be written makes the job end FAILED.
The writer is rlbench/tracking/record.py's JobRecord. docs/jobs.md, docs/metrics.md.
"""

from __future__ import annotations

import logging
import math
import socket
import tempfile
from pathlib import Path

import numpy as np

from rlbench.config.schema import Config
from rlbench.core.bound import bottleneck
from rlbench.core.observers import JobObserver
from rlbench.core.resources import cuda_properties, resolve_device
from rlbench.telemetry.charts.operations import as_columns, op_breakdown_rows, plot_op_breakdown
from rlbench.telemetry.job_telemetry import JobTelemetry
from rlbench.tracking.job_note import job_note
from rlbench.tracking.parent import NOTE_TAG
from rlbench.tracking.peaks import host_peak
from rlbench.tracking.record import JobRecord, brief, param_names
from rlbench.tracking.views import BOUND_TAG, HEADLINE, job_view, knobs_of, not_measured

log = logging.getLogger(__name__)
RETURNS_WINDOW = 20  # episode_return_mean20: the mean of the last 20 episodes' returns


def last_returns_mean(returns: list[float], k: int = RETURNS_WINDOW) -> float:
    return float(np.mean(returns[-k:])) if returns else float("nan")


class RecordObserver(JobObserver):
    def __init__(
        self,
        record: JobRecord,
        conf: Config,
        overrides: list[str],
        output_dir: Path | None,
        start_values: dict,
        telemetry: JobTelemetry | None = None,
    ):
        """start_values: what the record logged at the start (the compute grant), kept out of the end."""
        self.record, self.conf, self.overrides, self.output_dir = record, conf, overrides, output_dir
        self.start_values, self.telemetry = start_values, telemetry
        self.returns: dict[bool, list[tuple[float, int]]] = {False: [], True: []}  # evaluation? -> (return, frames)
        self.ticked: set[str] = set()  # the names logged as series
        self.bound: str | None = None
        self.walls: dict[str, float] = {}  # role -> wall seconds (the operations table's denominators)
        self.tables: dict[str, dict[str, list]] = {}  # the env's own tables (actor processes and hosts), by name

    def tick(self, metrics: dict, step: int) -> None:
        self.ticked.update(metrics)
        self.record.log_metrics(metrics, step)

    def episode(self, ret: float, frames: int, evaluation: bool) -> None:
        self.returns[evaluation].append((ret, frames))

    def final_values(self, final: dict, trainer) -> tuple[dict, dict]:
        self.walls = trainer.op_walls()
        env = getattr(
            trainer, "env", None
        )  # actor processes (rlbench/remote/job_actors.py) list themselves and their hosts
        self.tables = env.tables() if hasattr(env, "tables") else {}
        tags = env.tags() if hasattr(env, "tags") else {}
        train, evaluation = ([r for r, _ in self.returns[e]] for e in (False, True))
        values = {
            "episode_return_mean20": last_returns_mean(train),
            "eval_return_mean20": last_returns_mean(evaluation),
        }
        stepped = getattr(getattr(trainer, "actors", None), "stepping_since", None)
        opened = getattr(self.record, "opened_at", None)
        if stepped is not None and opened is not None:
            values["job_start_s"] = stepped - opened
            values, tags = self._envs_got(values, tags, getattr(trainer, "envs_got", None))
        utilisation, nulls = self._utilisation(final)
        values |= utilisation
        if evaluation:
            return values, tags | nulls
        why = "eval_envs=0" if not self.conf.eval_envs else "no evaluation episode ended within the task"
        return values, tags | nulls | {"null/eval_return_mean20": why}

    @staticmethod
    def _envs_got(values: dict, tags: dict, got) -> tuple[dict, dict]:
        """job_start_envs_s, the start's seconds getting the envs, and the tag envs_from_shelf."""
        if got is None:
            why = "the actors' processes make their own envs (python -m rlbench.profile's actor_start_s times that)"
            return values, tags | {"null/job_start_envs_s": why}
        return values | {"job_start_envs_s": got.seconds}, tags | {"envs_from_shelf": str(not got.made).lower()}

    def _utilisation(self, final: dict) -> tuple[dict, dict]:
        """learner_mfu and inference_mfu: their achieved TFLOP/s over the peak of this host at the
        job's precision (rlbench/tracking/peaks.py: published for a known GPU, else measured by
        the profile); the peak as `peak_tflops`, where it comes from as the tag `peak_source`."""
        roles = [r for r in ("learner", "inference") if f"{r}_tflops" in final]
        if not roles:
            return {}, {}
        peak, source = self._peak()
        if peak is None:
            return {}, {f"null/{r}_mfu": f"no peak to compare with: {source}" for r in roles} | {
                "null/peak_tflops": source
            }
        self.record.set_tags({"peak_source": source})
        return {"peak_tflops": peak} | {f"{r}_mfu": final[f"{r}_tflops"] / peak for r in roles}, {}

    def _peak(self) -> tuple[float | None, str]:

        device = resolve_device(self.conf.device)
        try:
            name = cuda_properties(device.index or 0).name if device.type == "cuda" else "cpu"
            return host_peak(self.conf.precision, device.type, name, socket.gethostname())
        except Exception as e:  # noqa: BLE001 - the job's record stands without it
            return None, f"the peak could not be read: {type(e).__name__}: {e}"[:300]

    def ended(self, final: dict, tags: dict) -> None:
        self.record.set_tags(tags)  # `null/<metric>` reasons first: the headline tags name them
        changed = {k: final.get(k) for k in self.start_values if final.get(k) != self.start_values[k]}
        if changed:
            log.warning(
                "compute grant changed during the job: %s at the start, %s at the end", self.start_values, changed
            )
        self.bound = self._log_final({k: v for k, v in final.items() if k not in self.start_values})
        self._log_operations(final, self.walls)
        self._log_tables()

    def closed(self, error: BaseException | None) -> None:
        self.record.log_series("episode_return", self.returns[False])
        self.record.log_series("eval_return", self.returns[True])
        if self.telemetry is not None and self.telemetry.started_at is not None:
            self._log_telemetry_files(plot=self.conf.telemetry.plot and not isinstance(error, KeyboardInterrupt))

    def _log_final(self, final: dict) -> str:
        """The final values where MLflow draws them comparably: a value only the end knows at
        step 0 (a bar in the UI's charts, one per run), a series' last value at the step after
        its last tick. Tags: the bound, a headline metric the job could not measure as "not
        measured: why"; the job's chart view; its description. Returns the bound in words."""
        record = self.record
        record.log_metrics({k: v for k, v in final.items() if k not in self.ticked}, step=0)
        record.log_metrics({k: v for k, v in final.items() if k in self.ticked}, step=math.ceil(final["runtime_s"]))
        bound = bottleneck(final)
        tags = {BOUND_TAG: f"{bound.kind} {bound.share:.0%}" if bound.share is not None else bound.kind}
        measured = {m for m in HEADLINE if final.get(m) is not None and math.isfinite(final[m])}
        if self.telemetry is None:  # nothing sampled power: say so where a value would have been
            record.set_unmeasured(
                {
                    m: "telemetry.enabled=false (no power or energy sampled)"
                    for m in HEADLINE
                    if m not in measured and m not in record.unmeasured
                }
            )
        tags |= {m: not_measured(m, record.unmeasured) for m in HEADLINE if m not in measured}
        charts = None
        try:
            charts = job_view(
                record.run.info.experiment_id,
                record.run_id,
                knobs_of([self.overrides], param_names(self.conf), varying=False),
                measured,
            )
        except Exception as e:  # noqa: BLE001 - the job's record stands without it
            log.warning("could not store the job's chart view: %s", brief(e))  # no SQL and parameters
        timeline = self.telemetry is not None and self.conf.telemetry.trace_window_s > 0
        record.set_tags(tags | {NOTE_TAG: job_note(final, self.conf.env.id, record.unmeasured, timeline, charts)})
        return tags[BOUND_TAG]

    def _log_operations(self, final: dict, walls: dict) -> None:
        """The op_frac metrics as a table (operations.json) and a bar chart (operations.png)."""
        rows = op_breakdown_rows(final, walls)
        if not rows:
            return
        try:
            self.record.log_table(as_columns(rows), "operations.json")
            with tempfile.TemporaryDirectory() as tmp:
                path = plot_op_breakdown(
                    rows,
                    (self.output_dir or Path(tmp)) / "operations.png",
                    f"time per operation, {self.record.run.info.run_name}",
                )
                self.record.log_artifacts([path])
        except Exception as e:  # noqa: BLE001 - the record notes it: the run cannot end FINISHED
            self.record.lost("operations.json and operations.png", e)

    def _log_tables(self) -> None:
        """The env's own tables (actors/processes.json, actors/hosts.json where actor processes
        stepped the envs); one that cannot be written is noted as lost."""
        for name, columns in self.tables.items():
            try:
                self.record.log_table(columns, name)
            except Exception as e:  # noqa: BLE001 - the record notes it: the run cannot end FINISHED
                self.record.lost(name, e)

    def _log_telemetry_files(self, plot: bool) -> None:
        """telemetry.csv, .png and trace.json into the run (also for a failed job; a stopped job
        draws no .png: matplotlib takes seconds on a loaded host, its csv holds the same samples);
        one that cannot be written is noted as lost (a finished job then ends FAILED), never
        masking a failure."""
        try:
            with tempfile.TemporaryDirectory() as tmp:
                folder = (self.output_dir or Path(tmp)) / "telemetry"
                self.record.log_artifacts(self.telemetry.artifacts(folder, plot), "telemetry")
        except Exception as e:  # noqa: BLE001 - the record notes it: the run cannot end FINISHED
            self.record.lost("telemetry/ (telemetry.csv, telemetry.png, trace.json)", e)
