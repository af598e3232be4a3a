"""The job's timeline (trace.json): bounded windows with a marker at the cut, the event cap,
named tracks, the GPU track from CUDA events (fake device), and op time spread over windows."""

from __future__ import annotations

import json

import pytest

from rlbench.config.schema import TelemetryConfig
from rlbench.telemetry.charts.timeline import op_shares
from rlbench.telemetry.gpu_busy import CudaBusyTimer
from rlbench.telemetry.job_telemetry import JobTelemetry
from rlbench.telemetry.timing import OpTimer
from rlbench.telemetry.trace import SpanRecorder, trace_events, write_trace

from .fakes import FakeCuda


def _spans(doc, cat=None):
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and (cat is None or e["cat"] == cat)]


def test_recorder_keeps_the_first_and_last_window_and_marks_the_cut():
    rec = SpanRecorder("learner", t0=100.0, window_s=2.0)
    for k in range(10):  # one 0.5 s span per second: starts at 100..109
        rec.add(f"op{k}", 100.0 + k, 100.5 + k)
    kept, dropped = rec.kept(t_end=110.0)
    assert [name for name, _, _ in kept] == ["op0", "op1", "op8", "op9"] and dropped == 6  # ends >= 108
    doc = trace_events([("learner", [rec])], t0=100.0, t_end=110.0, process="job", window_s=2.0)
    spans = _spans(doc)
    assert [(e["name"], e["ts"], e["dur"]) for e in spans][:2] == [("op0", 0.0, 500000.0), ("op1", 1e6, 500000.0)]
    (marker,) = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert marker["name"] == "... learner: 6 spans dropped ..." and marker["ts"] == 1.5e6  # where the head ends
    assert doc["rlbench"]["tracks"]["learner"] == {"thread": "learner", "spans": 4, "dropped": 6}


def test_recorder_caps_each_window_at_max_events():
    rec = SpanRecorder("actors", t0=0.0, window_s=100.0, max_events=3)
    for k in range(10):
        rec.add("env_step", k * 0.1, k * 0.1 + 0.05)
    kept, dropped = rec.kept(t_end=1.0)
    assert [a for _, a, _ in kept] == pytest.approx([0.0, 0.1, 0.2, 0.7, 0.8, 0.9]) and dropped == 4


def test_tracks_are_named_threads_and_the_file_is_trace_event_json(tmp_path):
    actors, inference = SpanRecorder("actors", 0.0, 5.0), SpanRecorder("inference", 0.0, 5.0)
    actors.add("inference", 1.0, 2.0)
    inference.add("forward", 1.2, 1.8)  # nested in the actors' inference call, same thread
    learner = SpanRecorder("learner", 0.0, 5.0)
    learner.add("forward_backward", 0.5, 3.0)
    path = write_trace(
        tmp_path / "trace.json", [("actors", [actors, inference]), ("learner", [learner])], 0.0, 3.0, "rlbench job", 5.0
    )
    doc = json.loads(path.read_text())
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {1: "actors", 2: "learner"} and doc["displayTimeUnit"] == "ms"
    assert {(e["tid"], e["cat"], e["name"]) for e in _spans(doc)} == {
        (1, "actors", "inference"),
        (1, "inference", "forward"),
        (2, "learner", "forward_backward"),
    }


def test_an_open_operation_counts_up_to_the_tick():
    timer = OpTimer("learner")
    timer.totals, timer.open = {"wait": 1.0}, ("forward_backward", 10.0)
    assert timer.snapshot(13.0) == {"wait": 1.0, "forward_backward": 3.0}
    timer.open = None
    assert timer.snapshot(13.0) == {"wait": 1.0}


def test_a_long_operation_is_spread_over_the_windows_it_spans():
    """A 10 s wait seen at 1 s ticks: ~1.0 of each window, not 0 for nine ticks then a spike."""
    ticks = [(float(t), {"learner": {"wait": float(t)}}) for t in range(11)]  # snapshots: open time counted
    times, shares = op_shares(ticks, "learner")
    assert times == [float(t) for t in range(1, 11)] and shares["wait"] == [1.0] * 10


def test_job_telemetry_records_gpu_spans_on_their_own_track_only_with_cuda(tmp_path, monkeypatch):
    cuda = FakeCuda()
    gpu = CudaBusyTimer("cuda", cuda=cuda)
    monkeypatch.setattr("rlbench.telemetry.job_telemetry.make_busy_timer", lambda device: (gpu, None))
    jt = JobTelemetry(TelemetryConfig(trace_window_s=5.0), "cuda")
    learner = jt.timer("learner")  # timed on the GPU and traced
    assert learner.gpu is gpu
    with learner.op("forward_backward", device=True):
        cuda.now = 4.0
    gpu.busy_s(wait=True)
    jt.stopped()
    doc = json.loads((jt.artifacts(tmp_path, plot=False)[-1]).read_text())
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"learner", "telemetry sampler", "GPU busy (CUDA events)"}
    (busy,) = _spans(doc, "gpu busy")
    assert busy["dur"] == pytest.approx(4000.0)  # 4 ms on the device

    monkeypatch.undo()
    cpu = JobTelemetry(TelemetryConfig(trace_window_s=5.0), "cpu")  # no CUDA: no GPU track, nothing faked
    cpu.timer("learner")
    cpu.stopped()
    doc = json.loads(cpu.artifacts(tmp_path / "cpu", plot=False)[-1].read_text())
    assert "GPU busy (CUDA events)" not in {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}


def test_no_trace_when_the_window_is_zero(tmp_path):
    jt = JobTelemetry(TelemetryConfig(trace_window_s=0.0), "cpu")
    timer = jt.timer("actors")
    assert timer.spans is None
    jt.stopped()
    assert [p.name for p in jt.artifacts(tmp_path, plot=False)] == ["telemetry.csv"]
