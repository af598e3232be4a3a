"""Power per pipeline state (actors alone, both, learner alone), metered by the profile with the
jobs' own telemetry sampler, and a task's predicted energy from it (an estimate): seconds of
each phase x its state's power, unreadable components kept with their reason, never as 0.
docs/predict.md, "The profile" and "The model".
"""

from __future__ import annotations

from contextlib import contextmanager

from rlbench.telemetry.sampler import TelemetrySampler

STATES = ("actors", "both", "learner")


def _sampler():
    return TelemetrySampler(rate_hz=10.0)


@contextmanager
def metered(rows: list | None, state: str, units: int, make_sampler=_sampler):
    """Meter the block as `state` at `units` into `rows` (nothing when rows is None)."""
    if rows is None:
        yield
        return
    sampler = make_sampler()
    sampler.start()
    try:
        yield
    finally:
        sampler.stop()
        s = sampler.summary()
        rows.append(
            {
                "state": state,
                "units": units,
                "power_cpu_w": s["power_cpu_w_avg"],
                "power_gpu_w": s["power_gpu_w_avg"],
                "cpu_reason": s["telemetry_cpu_reason"] if s["power_cpu_w_avg"] is None else None,
                "gpu_reason": s["telemetry_gpu_reason"] if s["power_gpu_w_avg"] is None else None,
            }
        )


def task_energy(phases: dict[str, float], rows: list[dict], units: int) -> tuple[float | None, str]:
    """(joules, how): the phases' seconds at their states' power at `units` (the nearest
    metered unit count otherwise); None with the reasons when no component was measured."""
    if not rows:
        return None, "not predicted: the profile metered no power (an older profile, or --updates 0)"
    near = min({r["units"] for r in rows}, key=lambda u: (abs(u - units), u))
    power = {r["state"]: r for r in rows if r["units"] == near}
    needed = [s for s in STATES if phases.get(s, 0.0) > 0]
    missing_state = [s for s in needed if s not in power]
    if missing_state:
        return None, f"not predicted: the profile metered no {', '.join(missing_state)} state"
    parts, reasons = {}, set()
    for comp in ("cpu", "gpu"):
        watts = [power[s][f"power_{comp}_w"] for s in needed]
        if all(w is not None for w in watts):
            parts[comp] = sum(phases[s] * w for s, w in zip(needed, watts, strict=True))
        else:
            reasons |= {
                f"{comp}: {power[s][f'{comp}_reason'] or 'not read'}"
                for s in needed
                if power[s][f"power_{comp}_w"] is None
            }
    if not parts:
        return None, "not predicted: no power was readable in the profile (" + "; ".join(sorted(reasons)) + ")"
    how = (
        f"estimate: each phase at the power its state drew in the profile ({' + '.join(sorted(parts))}"
        + (f" at {near} units" if near != units else "")
        + ")"
    )
    if reasons:
        how += "; not included: " + "; ".join(sorted(reasons))
    return sum(parts.values()), how
