"""A job run's description (MLflow's note): its headline numbers in words, so the run page says
what the two rates mean and where the time went without the user opening docs/metrics.md."""

from __future__ import annotations

from rlbench.core.metrics import OPS


def _pct(x) -> str:
    return f"{100 * x:.0f}%"


TIMELINE = (
    "- timeline of every role: artifact `telemetry/trace.json`; download it and open it in "
    'https://ui.perfetto.dev ("Open trace file") or chrome://tracing (docs/timeline.md)'
)


def job_note(
    final: dict, env_id: str, unmeasured: dict[str, str], timeline: bool = False, charts: str | None = None
) -> str:
    """`timeline`: the job wrote its Perfetto trace (telemetry on, telemetry.trace_window_s > 0);
    `charts`: the UI link of the job's chart view (rlbench/tracking/views.py)."""
    m = final
    head = (
        f"**rlbench job** on {env_id}: {m['frames']:.0f} frames, {m.get('learner_updates', 0):.0f} learner "
        f"updates in {m['runtime_s']:.1f} s"
    )
    # on the first line: MLflow 3.17 lays a fade that takes the clicks over a folded description's lower 90 px
    lines = [f"{head} · [Headline charts]({charts})" if charts else head, ""]
    if charts:
        lines += [
            (
                "Headline charts: runtime_s, task_fps, fps and, where measured, energy as bars; "
                'the series under "Model metrics" are plotted against seconds since the task started'
            ),
            "",
        ]
    rates = f"- `fps` {m['fps']:.0f}: the actors' rate (frames / their stepping time)"
    if m.get("task_fps") is not None:
        rates += f"; `task_fps` {m['task_fps']:.0f}: frames / `runtime_s`"
        done = m.get("actors_done_s")
        if done is not None and m["runtime_s"] - done > 0.05 * m["runtime_s"]:
            rates += (
                f" (the actors were done after {done:.1f} s; the learner's tail of "
                f"{m['runtime_s'] - done:.1f} s is part of the task)"
            )
    lines.append(rates)
    roles = []
    for role in OPS:
        shares = sorted(
            ((k.rsplit("/", 1)[1], v) for k, v in m.items() if k.startswith(f"op_frac/{role}/") and v >= 0.05),
            key=lambda kv: -kv[1],
        )
        if shares:
            roles.append(f"  - {role}: " + ", ".join(f"{op} {_pct(v)}" for op, v in shares))
    if roles:
        lines += [
            ("- time per operation, >= 5% of a role's wall time (all: artifacts `operations.json`, `operations.png`):"),
            *roles,
        ]
    if timeline:
        lines.append(TIMELINE)
    if unmeasured:
        lines.append(f"- not measured here: {', '.join(unmeasured)} (reasons: tag `unmeasured`)")
    return "\n".join(lines)
