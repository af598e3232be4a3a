"""Steady-state rates of one job (pure): the frames over the span of its tick windows after its
warm-up and before the first role finished, with the range of that span's blocks; power and
frames per joule where measured. Too few windows give no rate, only the count and why.
docs/metrics.md, "Steady-state rates".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import pairwise

from rlbench.core.metrics import TASK_ELAPSED

FPS, FPS_MIN, FPS_MAX = "steady/fps", "steady/fps_min", "steady/fps_max"
WINDOWS, SECONDS, UPDATES = "steady/windows", "steady/s", "steady/learner_updates_per_s"
POWER_GPU, POWER_CPU, FRAMES_PER_J = "steady/power_gpu_w", "steady/power_cpu_w", "steady/frames_per_j"
RATES = (FPS, FPS_MIN, FPS_MAX, UPDATES)
POWERS = {POWER_GPU: "power_gpu_w", POWER_CPU: "power_cpu_w"}  # steady name -> the tick's power metric
# The range of a steady rate is over this many consecutive blocks of the steady windows (fewer
# windows: one block each). A block several windows long holds whole bursts of actors that wait
# on the learner (a 1-s window then reads 0), so its rate is a rate, not the phase of a burst.
BLOCKS = 5


@dataclass(frozen=True)
class TickWindow:
    """One tick's window, in seconds since the task started, and what the tick logged over it."""

    start_s: float
    end_s: float
    fps: float | None = None
    updates_per_s: float | None = None
    power: tuple[tuple[str, float], ...] = ()  # (tick power metric, W) of the sources measured at the tick

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s


def windows_of(ticks: list[dict]) -> list[TickWindow]:
    """The ticks' metrics, in order, as windows: each from the previous tick (the first from 0)."""
    out, start = [], 0.0
    for m in ticks:
        end = float(m[TASK_ELAPSED])
        power = tuple((k, float(m[k])) for k in POWERS.values() if m.get(k) is not None)
        out.append(TickWindow(start, end, m.get("window/fps"), m.get("window/learner_updates_per_s"), power))
        start = end
    return out


def steady_windows(windows: list[TickWindow], warm_s: float, until_s: float) -> list[TickWindow]:
    """The windows wholly after the warm-up (`warm_s`) and before `until_s` (the first role
    done: the learner's tail, or the actors' tail after the learner), in which the actors stepped
    (a window of no length, two ticks at one time, has no rate: not counted)."""
    return [w for w in windows if w.fps is not None and w.length_s > 0 and w.start_s >= warm_s and w.end_s <= until_s]


def steady_rates(
    windows: list[TickWindow], warm_s: float | None, until_s: float, min_windows: int, reasons: dict[str, str]
) -> tuple[dict, dict]:
    """(values, null reasons) of the steady-state metrics. warm_s: None when the warm-up never
    ended (why: reasons["warm"]); reasons[steady power name]: why that power is not measured,
    where no steady window has it."""
    kept = steady_windows(windows, warm_s, until_s) if warm_s is not None else []
    values = {WINDOWS: len(kept), SECONDS: sum((w.length_s for w in kept), 0.0)}
    if len(kept) < max(min_windows, 1):
        why = (
            reasons.get("warm", "the warm-up never ended")
            if warm_s is None
            else (
                f"{len(kept)} steady windows, {min_windows} needed (tracking.steady_min_windows): warm-up until "
                f"{warm_s:.1f} s, the first role done at {until_s:.1f} s"
            )
        )
        return values, dict.fromkeys((*RATES, *POWERS, FRAMES_PER_J), why)
    blocks = [span_rate(b, "fps") for b in blocks_of(kept, BLOCKS)]
    values |= {FPS: span_rate(kept, "fps"), FPS_MIN: min(blocks), FPS_MAX: max(blocks)}
    nulls = {}
    updating = [w for w in kept if w.updates_per_s is not None]
    if updating:
        values[UPDATES] = span_rate(updating, "updates_per_s")
    else:
        nulls[UPDATES] = "no learner updates in the steady windows (no learner, or it finished first)"
    for name, tick in POWERS.items():
        watts = [dict(w.power)[tick] for w in kept if tick in dict(w.power)]
        if watts:
            values[name] = statistics.median(watts)
        else:
            nulls[name] = reasons.get(name, f"no {tick} tick in the steady windows")
    per_j = frames_per_joule(kept, [t for n, t in POWERS.items() if n in values])
    if per_j is None:
        nulls[FRAMES_PER_J] = (
            "; ".join(dict.fromkeys(nulls[n] for n in POWERS if n in nulls))
            or "no steady window in which every measured power source reported"
        )
    else:
        values[FRAMES_PER_J] = per_j
    return values, nulls


def span_rate(windows: list[TickWindow], rate: str) -> float:
    """The count over the windows' span: each window's `rate` (per s) times its length, summed,
    over their lengths summed (a mean weighted by length, not a median: a flow that steps in
    bursts has a rate though most of its windows read 0)."""
    return sum(getattr(w, rate) * w.length_s for w in windows) / sum(w.length_s for w in windows)


def blocks_of(windows: list[TickWindow], count: int) -> list[list[TickWindow]]:
    """The windows in order, in `count` consecutive blocks whose sizes differ by at most one
    (fewer windows than `count`: one block each)."""
    n = min(count, len(windows))
    size, extra = divmod(len(windows), n)
    edges = [i * size + min(i, extra) for i in range(n + 1)]
    return [windows[a:b] for a, b in pairwise(edges)]


def frames_per_joule(windows: list[TickWindow], sources: list[str]) -> float | None:
    """Frames over joules of the measured `sources` (tick power metrics), summed over the windows
    in which every one of them reported; None without a source or such a window."""
    frames = joules = 0.0
    for w in windows:
        power = dict(w.power)
        if sources and all(s in power for s in sources):
            frames += w.fps * w.length_s
            joules += sum(power[s] for s in sources) * w.length_s
    return frames / joules if joules > 0 else None
