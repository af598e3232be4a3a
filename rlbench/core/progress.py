"""Progress of one job: a tqdm bar on a terminal, periodic log lines otherwise (an observer: docs/jobs.md)."""

from __future__ import annotations

import logging
import math
import sys
import time

from tqdm import tqdm

from rlbench.core.observers import JobObserver

log = logging.getLogger("rlbench.core.progress")


def eta_s(frames: int, frame_target: int, fps: float, updates: int, update_target: int, ups: float) -> float:
    """Time left: the slower of the two halves of the task at their current rates."""
    left = 0.0
    for done, target, rate in ((frames, frame_target, fps), (updates, update_target, ups)):
        if done < target:
            left = max(left, (target - done) / rate if rate > 0 else math.inf)
    return left


def eta_text(frames: int, frame_target: int, fps: float, updates: int, update_target: int, ups: float) -> str:
    """Time left as a line shows it: both halves' estimate ("95s"); before the learner's first
    update (it waits for the actors' data) the actors' half alone, a lower bound (">= 80s");
    "?" before the actors step."""
    left = eta_s(frames, frame_target, fps, updates, update_target, ups)
    if not math.isinf(left):
        return f"{left:.0f}s"
    if updates == 0 and fps > 0:
        return f">= {eta_s(frames, frame_target, fps, 0, 0, 0.0):.0f}s"
    return "?"


def fps_text(frames: int, frame_target: int, metrics: dict, rate: float | None = None) -> str:
    """The actors' rate while they step (`window/fps` is logged only then): `rate`, frames over
    the time since the previous line, else the tick's window, which is 0 for a second in which
    the actors waited on a full unroll queue; otherwise what they are doing: still starting, or
    done with the task's frames."""
    if "window/fps" in metrics:
        return f"fps {metrics['window/fps'] if rate is None else rate:.0f}"
    return "actors done" if frames >= frame_target else "actors starting"


def frames_text(frames: int, frame_target: int, updates: int, update_target: int) -> str:
    """The task's frames as a line shows them: `frames 1200/4000 (30%)`; past the task's frames
    while the learner finishes its updates (the actors step on to feed it), the task's count and
    what it waits for, never a share above 100%."""
    if frames < frame_target or updates >= update_target:
        shown = min(frames, frame_target)
        return f"frames {shown}/{frame_target} ({100.0 * shown / frame_target:.0f}%)"
    return (
        f"frames {frame_target}/{frame_target} (100%; waiting for the learner's updates, "
        f"{frames - frame_target} more frames stepped meanwhile)"
    )


class Progress(JobObserver):
    """Observes a job (rlbench/core/observers.py): a line or the bar's update at each tick."""

    def __init__(self, frame_target: int, update_target: int, mode: str = "auto", every_s: float = 10.0):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "log"
        self.frame_target, self.update_target, self.mode = frame_target, update_target, mode
        self.every_s, self._last = every_s, 0.0
        self._mark: tuple[float, int] | None = None  # (time, frames) the shown rate is measured from
        self._bar = None
        self._t0 = time.monotonic()
        if mode == "bar":
            self._bar = tqdm(total=frame_target, unit="frame", unit_scale=True, dynamic_ncols=True)

    def _rate(self, frames: int) -> float | None:
        """Frames per second since the mark, moved on every `every_s` (one log line's span)."""
        now, mark = time.monotonic(), self._mark
        if mark is None or frames < mark[1]:
            self._mark = (now, frames)
            return None
        rate = (frames - mark[1]) / max(now - mark[0], 1e-9)
        if now - mark[0] >= self.every_s:
            self._mark = (now, frames)
        return rate

    def update(self, frames: int, updates: int, metrics: dict) -> None:
        rate = fps_text(frames, self.frame_target, metrics, self._rate(frames))
        elapsed = max(time.monotonic() - self._t0, 1e-9)  # averages: a window may hold no update
        left_txt = eta_text(frames, self.frame_target, frames / elapsed, updates, self.update_target, updates / elapsed)
        if self._bar is not None:
            self._bar.n = min(frames, self.frame_target)
            self._bar.set_postfix_str(f"{rate} updates={updates}/{self.update_target} left={left_txt}")
            return
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            done = frames_text(frames, self.frame_target, updates, self.update_target)
            log.info("%s %s updates %d/%d time left %s", done, rate, updates, self.update_target, left_txt)

    def started(self, trainer=None) -> None:
        self._t0 = time.monotonic()  # the rates average over the task, not the roles' set-up

    def tick(self, metrics: dict, step: int) -> None:
        self.update(metrics["frames"], metrics.get("learner_updates", 0), metrics)

    def closed(self, error: BaseException | None) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
