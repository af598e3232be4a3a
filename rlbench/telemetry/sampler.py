"""Background sampling of GPU (NVML), CPU package/DRAM (RAPL) and CPU utilisation (psutil).

`TelemetrySampler` reads the sources of rlbench.telemetry.sources, in their order, on a thread
of its own, from `start()` to `stop()`; a failing source loses its columns in that row, never
the sampling. The failure policy and telemetry.csv's columns: docs/metrics.md, "Telemetry, inside".
"""

from __future__ import annotations

import csv
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Self

from rlbench.telemetry.energy import DEFAULT_IDLE_FRAC
from rlbench.telemetry.sources import SourceContext, column_name, sources
from rlbench.telemetry.summary import Row, combine

Auto = Literal["auto"]
MAX_KEPT_ERRORS = 100
_SHORTHAND = {"nvml": "gpu", "rapl": "rapl", "cpu": "cpu"}  # keyword -> built-in source name

__all__ = ["TelemetrySampler", "column_name"]


class TelemetrySampler:
    """Samples all telemetry sources at `rate_hz` on a background thread (docs/metrics.md).

    Sources default to "auto" (built here, and closed by `stop()`); pass an object to
    inject one (the caller keeps ownership) or None to disable it, by its source name in
    `meters` or, for the built-in ones, as `nvml` ("gpu"), `rapl` and `cpu`. `cpu_tdp_w` enables
    the labelled linear CPU energy estimate, used only when RAPL gives no reading.
    `clock` must be monotonic seconds; the thread paces itself with it.
    """

    def __init__(
        self,
        rate_hz: float = 10.0,
        nvml: Any = "auto",
        rapl: Any = "auto",
        cpu: Any = "auto",
        clock: Callable[[], float] = time.monotonic,
        cpu_tdp_w: float | None = None,
        cpu_idle_frac: float = DEFAULT_IDLE_FRAC,
        fail_after: int = 5,
        stop_timeout_s: float = 5.0,
        meters: dict[str, Any] | None = None,
    ) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate_hz must be > 0, got {rate_hz}")
        self.period_s = 1.0 / rate_hz
        self._owned: list[Any] = []
        self._clock = clock
        self.cpu_tdp_w, self.cpu_idle_frac = cpu_tdp_w, cpu_idle_frac
        self._ctx = SourceContext(clock, cpu_tdp_w, cpu_idle_frac)
        given = {_SHORTHAND[k]: v for k, v in (("nvml", nvml), ("rapl", rapl), ("cpu", cpu))} | (meters or {})
        self.sources = sources()
        unknown = set(given) - {s.name for s in self.sources}
        if unknown:
            raise ValueError(
                f"no telemetry source {', '.join(sorted(unknown))}; known: {', '.join(s.name for s in self.sources)}"
            )
        # source name -> its meter (None: disabled)
        self.meters: dict[str, Any] = {s.name: self._own(given.get(s.name, "auto"), s) for s in self.sources}
        self._fail_after, self._stop_timeout_s = fail_after, stop_timeout_s
        self._rows: list[Row] = []
        self._errors: deque[str] = deque(maxlen=MAX_KEPT_ERRORS)
        self.thread_cpu_s: float | None = None  # CPU seconds of the sampling thread, after stop()
        self.error_count = 0
        self._failures: Counter[str] = Counter()  # per source, total
        self._in_a_row: Counter[str] = Counter()  # per source, consecutive
        self._last_error: dict[str, str] = {}
        self.failure_reasons: dict[str, str] = {}  # sources that kept failing
        self._lock = threading.Lock()  # guards rows and errors
        self._sample_lock = threading.Lock()  # one pass at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self.spans = None  # SpanRecorder of the timeline, set by the job's telemetry

    def _own(self, given: Any, source: Any) -> Any:
        if not (isinstance(given, str) and given == "auto"):
            return given
        meter = source.make(self._ctx)
        self._owned.append(meter)
        return meter

    # ---- errors ---------------------------------------------------------------------
    @property
    def errors(self) -> list[str]:
        """Texts of the most recent sampling exceptions (at most MAX_KEPT_ERRORS)."""
        with self._lock:
            return list(self._errors)

    def _record_error(self, source: str, err: BaseException) -> None:
        text = f"{source}: {type(err).__name__}: {err}"
        with self._lock:
            self._errors.append(text)
            self.error_count += 1
        self._failures[source] += 1
        self._in_a_row[source] += 1
        self._last_error[source] = text
        if self._in_a_row[source] >= self._fail_after:
            self.failure_reasons[source] = (
                f"{source} sampling failed {self._in_a_row[source]} times in a row (last: {text})"
            )

    def _guarded(self, name: str, meter: Any, fields: Callable[[Any], Row]) -> Row:
        """fields(meter.sample()); {} (recorded) when that raises or the source is disabled."""
        if meter is None:
            return {}
        try:
            row = fields(meter.sample())
        except Exception as e:  # noqa: BLE001 - a source must never stop sampling
            self._record_error(name, e)
            return {}
        self._in_a_row[name] = 0
        return row

    # ---- sampling -------------------------------------------------------------------
    def sample_now(self) -> None:
        """Take one row now (thread-safe); never raises. With `spans` set (a SpanRecorder of
        the job's timeline), the pass is recorded as a span."""
        t0 = time.perf_counter()
        with self._sample_lock:
            try:
                row = self._take_row()
            except Exception as e:  # noqa: BLE001 - formatting bugs must not kill sampling
                self._record_error("sampler", e)
                return
            if self.spans is not None:
                self.spans.add("sample", t0, time.perf_counter())
        with self._lock:
            self._rows.append(row)

    def _take_row(self) -> Row:
        row: Row = {"t": self._clock()}
        tail: Row = {}
        for source in self.sources:
            fields = self._guarded(source.name, self.meters[source.name], source.fields)
            last = source.tail_prefix
            row |= {k: v for k, v in fields.items() if not (last and k.startswith(last))}
            tail |= {k: v for k, v in fields.items() if last and k.startswith(last)}
        return row | tail  # e.g. the per-core columns end up last

    def _run(self) -> None:
        """Thread body; an unexpected end is recorded, never silent. Its own CPU time is
        kept in `thread_cpu_s`: the sampler's direct cost, free of run-to-run noise."""
        t0 = time.thread_time()
        try:
            self._loop()
        except Exception as e:  # noqa: BLE001 - e.g. an injected clock that raises
            reason = f"sampling thread ended: {type(e).__name__}: {e}"
            self._record_error("sampler", RuntimeError(reason))
            self.failure_reasons["sampler"] = reason
        finally:
            self.thread_cpu_s = time.thread_time() - t0

    def _loop(self) -> None:
        """One row per period until stopped, without bursts after a stall."""
        next_t = self._clock() + self.period_s
        while not self._stop.wait(max(next_t - self._clock(), 0.0)):
            if not threading.main_thread().is_alive():  # interpreter exiting without stop()
                self._record_error("sampler", RuntimeError("main thread exited without stop()"))
                return
            self.sample_now()
            next_t = max(next_t + self.period_s, self._clock())

    # ---- lifecycle ------------------------------------------------------------------
    def start(self) -> TelemetrySampler:
        """Take the first row and start the "telemetry" thread (a sampler runs once)."""
        if self._started:
            raise RuntimeError("TelemetrySampler already started; make a new one per run")
        self._started = True
        self.sample_now()
        self._thread = threading.Thread(target=self._run, name="telemetry", daemon=False)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop and join the thread, take the last row, close owned sources (idempotent)."""
        self._started = True  # a stopped sampler cannot be started
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(self._stop_timeout_s)
            if thread.is_alive():
                self._thread = thread
                self._record_error("sampler", TimeoutError(f"thread alive {self._stop_timeout_s}s after stop()"))
                return
            self.sample_now()
        while self._owned:
            source = self._owned.pop()
            if hasattr(source, "close"):
                source.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- results --------------------------------------------------------------------
    def rows(self) -> list[Row]:
        """Copies of all rows so far, at the full sampling rate."""
        with self._lock:
            return [dict(r) for r in self._rows]

    def latest(self) -> Row | None:
        """The newest row (a copy), or None before the first sample."""
        with self._lock:
            return dict(self._rows[-1]) if self._rows else None

    def to_csv(self, path: str | Path) -> Path:
        """Write the rows as CSV (columns: union in first-seen order; blank = None)."""
        rows = self.rows()
        columns = list(dict.fromkeys(k for r in rows for k in r))
        path = Path(path)
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, restval="")
            writer.writeheader()
            writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
        return path

    def summary(self) -> Row:
        """The contract dict of rlbench.telemetry.summary (None + reasons where unknown), then
        the plugged-in meters' keys: each source accounts for its part with the notes of its side."""
        notes: dict[str, list[str]] = {}
        for source in self.sources:
            notes.setdefault(source.side, []).extend(self._source_notes(source))
        for side in notes:
            notes[side] += self._failure_notes("sampler")
        rows, parts, energy = self.rows(), {}, []
        for source in self.sources:
            parts |= source.account(rows, notes[source.side], self._ctx)
            energy += source.energy_keys
        return combine(parts, energy)

    def _source_notes(self, source: Any) -> list[str]:
        """Degradation notes of one source: disabled, or its own reasons and its sampling failures."""
        meter = self.meters[source.name]
        if meter is None:
            return [f"{source.name} telemetry disabled"]
        return source.notes(meter, "; ".join(self._failure_notes(source.name)) or None)

    def _failure_notes(self, name: str) -> list[str]:
        if name in self.failure_reasons:
            return [self.failure_reasons[name]]
        if self._failures[name]:
            return [f"{name} sampling raised {self._failures[name]} times (last: {self._last_error[name]})"]
        return []
