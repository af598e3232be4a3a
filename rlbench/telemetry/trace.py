"""Each job's timeline as a Chrome trace / Perfetto JSON file (`telemetry/trace.json`).

`SpanRecorder` keeps one track's spans, bounded to the first and last `window_s` seconds (at
most MAX_EVENTS each); `write_trace` writes the tracks as the Trace Event Format's complete
events. Tracks, size, cost and format: docs/timeline.md.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

MAX_EVENTS = 20_000  # per track and per end (first / last window)


class SpanRecorder:
    """The spans of one track, bounded (docs/timeline.md, "Size"). Single writer: the track's thread."""

    def __init__(self, track: str, t0: float, window_s: float, max_events: int = MAX_EVENTS):
        self.track, self.t0, self.window_s, self.max_events = track, t0, window_s, max_events
        self.head: list[tuple[str, float, float]] = []
        self.tail: deque[tuple[str, float, float]] = deque(maxlen=max_events)
        self.total = 0
        self.note: str | None = None  # how the track's times were made, in the file's summary (an estimate's label)

    def add(self, name: str, start: float, end: float) -> None:
        self.total += 1
        if start - self.t0 < self.window_s and len(self.head) < self.max_events:
            self.head.append((name, start, end))
        else:
            self.tail.append((name, start, end))

    def kept(self, t_end: float) -> tuple[list[tuple[str, float, float]], int]:
        """(spans to write, spans dropped between the two windows) for a job that ended at t_end."""
        tail = [s for s in list(self.tail) if s[2] >= t_end - self.window_s]
        spans = self.head + tail
        return spans, self.total - len(spans)


def trace_events(
    tracks: list[tuple[str, list[SpanRecorder]]], t0: float, t_end: float, process: str, window_s: float
) -> dict:
    """The trace document: tracks are (thread name, recorders drawn on that thread)."""

    def us(t):
        return round((t - t0) * 1e6, 1)

    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": process}}]
    summary = {}
    for tid, (thread, recorders) in enumerate(tracks, start=1):
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid, "args": {"name": thread}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
        for rec in recorders:
            spans, dropped = rec.kept(t_end)
            summary[rec.track] = {
                "thread": thread,
                "spans": len(spans),
                "dropped": dropped,
                **({"note": rec.note} if rec.note else {}),
            }
            events += [
                {
                    "ph": "X",
                    "name": name,
                    "cat": rec.track,
                    "pid": 1,
                    "tid": tid,
                    "ts": us(a),
                    "dur": round((b - a) * 1e6, 1),
                }
                for name, a, b in spans
            ]
            if dropped:
                cut = rec.head[-1][2] if rec.head else t0 + rec.window_s
                events.append(
                    {
                        "ph": "i",
                        "s": "t",
                        "name": f"... {rec.track}: {dropped} spans dropped ...",
                        "pid": 1,
                        "tid": tid,
                        "ts": us(cut),
                    }
                )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "rlbench": {
            "window_s": window_s,
            "max_events_per_end": MAX_EVENTS,
            "duration_s": round(t_end - t0, 3),
            "tracks": summary,
        },
    }


def write_trace(
    path: Path, tracks: list[tuple[str, list[SpanRecorder]]], t0: float, t_end: float, process: str, window_s: float
) -> Path:
    path.write_text(json.dumps(trace_events(tracks, t0, t_end, process, window_s), separators=(",", ":")))
    return path
