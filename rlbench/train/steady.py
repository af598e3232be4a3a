"""The steady-state rates of a job as an observer (rlbench/core/observers.py): keeps each tick's
window rates and power, and at the end logs rlbench/core/steady.py's values, or why not.
"""

from __future__ import annotations

import logging

from rlbench.core import steady as st
from rlbench.core.metrics import TASK_ELAPSED
from rlbench.core.observers import JobObserver

log = logging.getLogger(__name__)
_KEPT = (TASK_ELAPSED, "window/fps", "window/learner_updates_per_s", *st.POWERS.values())


def steady_span(trainer, runtime_s: float) -> tuple[float | None, float, str]:
    """(end of the warm-up, end of the steady state), in seconds since the task started, and why
    the warm-up never ended (for None). The warm-up: the envs made and reset, the actors' first
    step (central inference's first forward: the device's warm-up) and the learner's first
    update (none without updates to make); the steady state ends when the first role is done
    (the learner's tail follows)."""
    t0, actors, learner = trainer.started, trainer.actors, trainer.learner
    if t0 is None:
        return None, runtime_s, "no steady state: the task's start was not recorded"
    if learner is not None and not learner.update_target:  # workload.learner_updates=0: the actors alone
        learner = None
    marks = [actors.first_step_at] + ([learner.first_update_at] if learner is not None else [])
    ends = [t for t in (actors.stepping_until, learner.finished_at if learner is not None else None) if t is not None]
    until = min(ends) - t0 if ends else runtime_s
    if None in marks:
        why = "the actors never stepped" if actors.first_step_at is None else "the learner made no update"
        return None, until, f"no steady state: {why}"
    return max(marks) - t0, until, ""


class SteadyRates(JobObserver):
    def __init__(self, min_windows: int, telemetry=None):
        self.min_windows, self.telemetry = min_windows, telemetry
        self.ticks: list[dict] = []

    def tick(self, metrics: dict, step: int) -> None:
        self.ticks.append({k: metrics[k] for k in _KEPT if k in metrics})

    def final_values(self, final: dict, trainer) -> tuple[dict, dict]:
        warm_s, until_s, why = steady_span(trainer, final["runtime_s"])
        values, nulls = st.steady_rates(
            st.windows_of(self.ticks), warm_s, until_s, self.min_windows, self._reasons() | {"warm": why}
        )
        if st.FPS in values:
            log.info(
                "steady: fps %.0f (%.0f..%.0f) over %d windows, %.1f s (from %.1f s to %.1f s of the task)",
                values[st.FPS],
                values[st.FPS_MIN],
                values[st.FPS_MAX],
                values[st.WINDOWS],
                values[st.SECONDS],
                warm_s,
                until_s,
            )
        else:
            log.warning("steady: no steady rate: %s", nulls[st.FPS])
        return values, {f"null/{k}": v for k, v in nulls.items()}

    def _reasons(self) -> dict[str, str]:
        """Why each steady power may be unmeasured: the telemetry's own reason where it has one."""
        if self.telemetry is None:
            return dict.fromkeys(st.POWERS, "telemetry.enabled=false (no power sampled)")
        summary = self.telemetry.sampler.summary()
        return {
            st.POWER_GPU: summary.get("telemetry_gpu_reason") or "no GPU power sampled in the steady windows",
            st.POWER_CPU: summary.get("telemetry_cpu_reason") or "no CPU package power (RAPL) in the steady windows",
        }
