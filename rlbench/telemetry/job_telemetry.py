"""The telemetry role of one job: the sampler thread, 1 Hz step metrics, the final energy
and time-per-operation metrics, and the CSV and PNG artifacts.

Metric names are the contract in docs/metrics.md. A value that cannot be known is not
logged as a number: the job tags `null/<metric>` with the reason instead.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from rlbench.config.schema import TelemetryConfig
from rlbench.core.observers import JobObserver
from rlbench.telemetry.gpu_busy import make_busy_timer
from rlbench.telemetry.ops import calibrate_annotation, op_metrics
from rlbench.telemetry.sampler import TelemetrySampler
from rlbench.telemetry.summary import SUMMARY_KEYS  # noqa: F401 - tests build summaries with it
from rlbench.telemetry.timing import OpTimer
from rlbench.telemetry.trace import SpanRecorder, write_trace

_TAGS = ("energy_source_gpu", "energy_source_cpu")
_THREAD_OF = {
    "actors": "actors (with central inference)",
    "inference": "actors (with central inference)",
    "learner": "learner",
}  # timer role -> the thread it runs on


def _gpu_sum(row: dict, metric: str) -> float | None:
    vals = [v for k, v in row.items() if k.startswith("gpu") and k.endswith("_" + metric)]
    return sum(vals) if vals and all(v is not None for v in vals) else None


def _gpu_mean(row: dict, metric: str) -> float | None:
    s = _gpu_sum(row, metric)
    n = sum(1 for k in row if k.startswith("gpu") and k.endswith("_" + metric))
    return s / n if s is not None else None


class JobTelemetry(JobObserver):
    """Observes a job (rlbench/core/observers.py): makes the roles' timers (`timer`), samples from
    `started` to `stopped`, adds power to each tick and energy and time per operation to the
    final metrics."""

    def __init__(self, cfg: TelemetryConfig, device):
        self.cfg = cfg
        self.gpu_busy, self.gpu_busy_reason = make_busy_timer(device)
        self.sampler = TelemetrySampler(rate_hz=cfg.rate_hz, cpu_tdp_w=cfg.cpu_tdp_w)
        self.inner_s, self.full_s = calibrate_annotation()
        self.op_ticks: list[tuple[float, dict[str, dict[str, float]]]] = []  # (t, role -> op totals)
        self._roles: dict[str, list[SpanRecorder]] = {}  # the timeline's role threads -> their tracks
        self._own: dict[str, list[SpanRecorder]] = {}  # the sampler's and the GPU's tracks
        self._t0 = time.perf_counter()  # the timeline's origin: moved to the start by `started`
        self._trace_end: float | None = None
        self._process_tracks = None  # the actor processes' tracks, where the env has them (rlbench/remote/)
        self._prev: dict | None = None
        self.started_at: float | None = None  # set by `started`; the job logs artifacts only after it
        if cfg.trace_window_s:  # record the timeline, trace.json; nothing when it is 0
            self.sampler.spans = self._track("telemetry", "telemetry sampler", self._own)
            if self.gpu_busy is not None:
                self.gpu_busy.spans = self._track("gpu busy", "GPU busy (CUDA events)", self._own)

    def _track(self, track: str, thread: str, into: dict) -> SpanRecorder:
        recorder = SpanRecorder(track, self._t0, self.cfg.trace_window_s)
        into.setdefault(thread, []).append(recorder)
        return recorder

    def timer(self, role: str) -> OpTimer:
        """The timer of one role: its device operations timed by CUDA events (on CUDA), its
        spans recorded for the timeline. Central inference runs on the actors' thread: its
        spans nest in theirs, on one track."""
        spans = self._track(role, _THREAD_OF.get(role, role), self._roles) if self.cfg.trace_window_s else None
        return OpTimer(role, gpu=self.gpu_busy, spans=spans)

    def started(self, trainer=None) -> None:
        if self.cfg.trace_window_s:  # actor processes ship their spans; their tracks are drawn at the end
            self._process_tracks = getattr(getattr(trainer, "env", None), "trace_tracks", None)
        self._t0 = time.perf_counter()
        for recorders in (*self._roles.values(), *self._own.values()):
            for r in recorders:
                r.t0 = self._t0
        self.sampler.start()
        self.started_at = time.monotonic()
        if trainer is not None:  # the timeline's first second: from the task's start, not its first tick
            self._op_tick(trainer.timers())

    def tick_values(self, trainer) -> dict:
        return self.power_tick(trainer.timers())

    def stopped(self) -> None:
        self.sampler.stop()
        self._trace_end = time.perf_counter()

    def final_values(self, final: dict, trainer) -> tuple[dict, dict]:
        timers = trainer.timers()
        self._op_tick(timers)  # the timeline's last second: up to the task's end
        return self.final(final, timers, trainer.op_walls())

    def _op_tick(self, timers: list[OpTimer]) -> None:
        """Remember each role's op totals now, for the timeline (charts/timeline.py, op_shares)."""
        now = time.perf_counter()  # the timers' clock; an open operation counts up to now
        self.op_ticks.append((time.monotonic(), {t.role: t.snapshot(now) for t in timers}))

    def power_tick(self, timers: list[OpTimer]) -> dict:
        """1 Hz step metrics from the newest sample; remembers op totals for the plot."""
        self._op_tick(timers)
        row = self.sampler.latest()
        if row is None:
            return {}
        m = {
            "power_gpu_w": _gpu_sum(row, "power_w"),
            "gpu_util": _gpu_mean(row, "util"),
            "cpu_util": row.get("cpu_util"),
            "proc_cores_busy": row.get("proc_cores_busy"),
        }
        prev, self._prev = self._prev, row
        if prev and row.get("cpu_pkg_energy_j") is not None and prev.get("cpu_pkg_energy_j") is not None:
            dt = row["t"] - prev["t"]
            if dt > 0:
                m["power_cpu_w"] = (row["cpu_pkg_energy_j"] - prev["cpu_pkg_energy_j"]) / dt
        return {k: v for k, v in m.items() if v is not None}

    def final(self, result: dict, timers: list[OpTimer], walls: dict[str, float]) -> tuple[dict, dict]:
        """(metrics, tags) of the whole task; unknown values become `null/<name>` tags."""
        summary = self.sampler.summary()
        explained = {k: e for s in self.sampler.sources for k, e in s.reasons(summary).items()}  # reason -> energy
        values = {k: v for k, v in summary.items() if k not in _TAGS and k not in explained}
        tags = {k: str(summary[k]) for k in _TAGS}
        # a measured side's degradation note (a GPU lost mid-run, an estimate); an unmeasured
        # side's reason goes into the `unmeasured` tag instead, once
        tags |= {k: str(summary[k]) for k, e in explained.items() if summary[k] and summary[e] is not None}
        reasons = {
            "gpu": summary["telemetry_gpu_reason"] or "no GPU energy measured",
            "cpu": summary["telemetry_cpu_reason"] or "no CPU energy measured",
        }
        reasons |= {k: r for s in self.sampler.sources for k, r in s.unmeasured(summary).items()}
        values["perf_per_watt"] = self._perf_per_watt(result.get("fps"), summary)
        frames = result.get("frames") or 0
        e = summary["energy_per_task_j"]
        values["joules_per_mframe"] = e / (frames / 1e6) if e is not None and frames else None
        busy = self.gpu_busy.busy_s(wait=True) if self.gpu_busy is not None else None
        values["gpu_busy_frac"] = busy / result["runtime_s"] if busy is not None else None
        metrics = {k: v for k, v in values.items() if v is not None and not math.isnan(v)}
        for k, v in values.items():
            if v is None:
                tags[f"null/{k}"] = self._why_null(k, reasons, summary)
        metrics |= op_metrics(timers, walls, self.inner_s, self.full_s)
        metrics["annotation_cost_us"] = self.full_s * 1e6
        metrics["telemetry_samples"] = len(self.sampler.rows())
        if self.sampler.thread_cpu_s is not None:
            metrics["telemetry_cpu_s"] = self.sampler.thread_cpu_s
        tags["telemetry_errors"] = str(self.sampler.error_count)
        return metrics, tags

    def _perf_per_watt(self, fps, summary) -> float | None:
        """fps per average watt of the measured sources (an estimated CPU power is not one)."""
        watts = [w for s in self.sampler.sources if (w := s.watts(summary))]
        return fps / sum(watts) if fps and watts else None

    def _why_null(self, key: str, reasons: dict, summary: dict) -> str:
        if key == "gpu_busy_frac":
            return self.gpu_busy_reason or "no finished CUDA spans"
        if key in reasons:  # a plugged-in power meter's metric
            return reasons[key]
        if "gpu" in key:
            return reasons["gpu"]
        if key in ("perf_per_watt", "joules_per_mframe", "energy_per_task_j"):
            return "no measured power (see the GPU and CPU reasons)"
        return reasons["cpu"]

    def artifacts(self, out_dir: Path, plot: bool = True) -> list[Path]:
        """telemetry.csv (every sample) and telemetry.png (see rlbench.telemetry.charts.timeline)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [self.sampler.to_csv(out_dir / "telemetry.csv")]
        if plot:
            from rlbench.telemetry.charts.timeline import plot_timeline  # lazy: matplotlib takes seconds to import

            paths.append(plot_timeline(self.sampler.rows(), self.op_ticks, out_dir / "telemetry.png"))
        if self.cfg.trace_window_s:
            end = self._trace_end or time.perf_counter()
            processes = self._process_tracks(self._t0, self.cfg.trace_window_s) if self._process_tracks else []
            threads = [*self._roles.items(), *processes, *self._own.items()]  # the roles' tracks first
            paths.append(
                write_trace(out_dir / "trace.json", threads, self._t0, end, "rlbench job", self.cfg.trace_window_s)
            )
        return paths
