"""What `python -m rlbench.predict` prints and draws: the grid's table, figure and
recommendation, and the validation's table, figure and prediction_error (the commands that print them:
rlbench/cli/predict.py). docs/predict.md."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rlbench.telemetry.charts.layout import tight_layout

GRID_COLUMNS = (
    "actors",
    "actor_threads",
    "sm_limit",
    "inference_batch",
    "precision",
    "cpu_gpu_ratio",
    "fps",
    "learner_updates_per_s",
    "runtime_s",
    "bound",
)


REMOTE_KNOBS = ("actor_procs", "actor_hosts")  # columns only where a configuration has them


def grid_columns(preds) -> tuple[str, ...]:
    """GRID_COLUMNS, with actor_procs / actor_hosts after actor_threads where any configuration sets them."""
    extra = tuple(k for k in REMOTE_KNOBS if any(p.knobs.get(k) for p in preds))
    i = GRID_COLUMNS.index("actor_threads") + 1
    return GRID_COLUMNS[:i] + extra + GRID_COLUMNS[i:]


def saturation(preds, key: str = "actor_hosts", within: float = 0.05) -> str | None:
    """Where more actor hosts (or processes) stop helping: the fewest of `key` whose predicted
    runtime_s is within `within` of the grid's best, what bounds it there and at the most;
    None where the grid does not vary `key`."""
    values = {p.knobs.get(key, 0) for p in preds}
    if len(values) < 2:
        return None
    best = min(p.runtime_s for p in preds)
    enough = min(
        (p for p in preds if p.runtime_s <= best * (1 + within)), key=lambda p: (p.knobs.get(key, 0), p.runtime_s)
    )
    most = max(preds, key=lambda p: (p.knobs.get(key, 0), -p.runtime_s))
    what = key.replace("_", " ")
    return (
        f"recommended {what} per learner host: {enough.knobs.get(key, 0)} (predicted runtime_s "
        f"{enough.runtime_s:.1f} s, fps {enough.fps:.0f}, within {within:.0%} of the best {best:.1f} s; bound: "
        f"{enough.bound}); more stop helping: at {most.knobs.get(key, 0)} the bound is {most.bound} "
        f"(runtime_s {most.runtime_s:.1f} s, fps {most.fps:.0f})"
    )


def _cell(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3g}" if isinstance(v, float) and abs(v) < 10 else (f"{v:.0f}" if isinstance(v, float) else str(v))


def table(header: list[str], rows: list[list]) -> str:
    cells = [header] + [[_cell(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells)


def recommend(preds):
    """The configuration that finishes the task first (fewest compute units on a tie)."""
    return min(preds, key=lambda p: (round(p.runtime_s, 6), p.knobs["sm_limit"], p.knobs["actor_threads"]))


def _figure(ncols: int, width: float = 5.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: keeps matplotlib off the start
    from matplotlib.figure import Figure  # lazy: keeps matplotlib off the start

    fig = Figure(figsize=(width * ncols, 4.4))
    FigureCanvasAgg(fig)
    return fig, fig.subplots(1, ncols)


def _wrap(text: str, width: int = 150) -> str:
    return "\n".join(textwrap.wrap(text, width))


def grid_figure(preds, best, names: str, path: Path) -> Path:
    """Predicted fps and runtime_s against the CPU/GPU ratio, a line per actor count through
    the best configuration at each ratio, every configuration a dot (against actors when the
    grid has one ratio); the recommended configuration circled."""
    by_ratio = len({p.cpu_gpu_ratio for p in preds}) > 1
    series, label = (
        ("actors", "CPU/GPU ratio (actor threads / compute units)") if by_ratio else ("cpu_gpu_ratio", "actors")
    )
    with_energy = any(p.energy_per_task_j is not None for p in preds)
    metrics = ("fps", "runtime_s", "energy_per_task_j") if with_energy else ("fps", "runtime_s")
    fig, axes = _figure(len(metrics), 6.0)

    def x(p):
        return p.cpu_gpu_ratio if by_ratio else p.knobs["actors"]

    for ax, metric in zip(axes, metrics, strict=True):
        pick = max if metric == "fps" else min
        for v in sorted({p.knobs.get(series, p.cpu_gpu_ratio) for p in preds}):
            pts = [
                (x(p), getattr(p, metric))
                for p in preds
                if p.knobs.get(series, p.cpu_gpu_ratio) == v and getattr(p, metric) is not None
            ]
            if not pts:
                continue
            line = sorted((a, pick(b for a2, b in pts if a2 == a)) for a in {a for a, _ in pts})
            drawn = ax.plot([a for a, _ in line], [b for _, b in line], marker="o", label=f"{series} {v:g}")
            ax.scatter([a for a, _ in pts], [b for _, b in pts], s=14, color=drawn[0].get_color(), alpha=0.5)
        if getattr(best, metric) is not None:
            ax.scatter(
                [x(best)], [getattr(best, metric)], s=160, facecolors="none", edgecolors="k", label="recommended"
            )
        ax.set(
            xlabel=label,
            ylabel=f"predicted {metric}",
            title={"fps": "throughput", "runtime_s": "task time", "energy_per_task_j": "energy per task"}[metric],
        )
        if not by_ratio:
            ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    energy = "" if with_energy else f" Energy per task: {preds[0].energy_reason}"
    fig.suptitle(
        _wrap(
            f"Predicted (not measured) with {names}; a line through the best configuration at each x, "
            f"a dot per configuration.{energy}",
            130,
        ),
        fontsize=9,
    )
    tight_layout(fig)
    fig.savefig(path, dpi=90)
    return path


def validation_figure(checked, names: str, error: float, path: Path | None = None):
    """Predicted against measured fps and runtime_s per job, with y = x and a +-15% band; the
    Figure, saved to `path` when given."""
    fig, axes = _figure(2)
    short = {"actors": "a", "actor_threads": "t", "sm_limit": "u", "actor_procs": "p", "actor_hosts": "h"}
    varying = [k for k in short if len({c.predicted.knobs.get(k, 0) for c in checked}) > 1] or ["actors"]
    for ax, key in zip(axes, ("fps", "runtime_s"), strict=True):
        measured = [c.measured[key] for c in checked]
        predicted = [getattr(c.predicted, key) for c in checked]
        ax.scatter(measured, predicted, zorder=3)
        for c, x, y in zip(checked, measured, predicted, strict=True):
            ax.annotate(
                "/".join(f"{c.predicted.knobs.get(k, 0)}{short[k]}" for k in varying),
                (x, y),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        lo, hi = 0.8 * min(measured + predicted), 1.1 * max(measured + predicted)
        ax.plot([lo, hi], [lo, hi], color="k", lw=1, label="predicted = measured")
        ax.fill_between(
            [lo, hi], [0.85 * lo, 0.85 * hi], [1.15 * lo, 1.15 * hi], color="k", alpha=0.08, label="within 15%"
        )
        ax.set(xlim=(lo, hi), ylim=(lo, hi), xlabel=f"measured {key}", ylabel=f"predicted {key}", title=key)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    legend = ", ".join(f"{short[k]} = {k}" for k in varying)
    fig.suptitle(
        _wrap(
            f"prediction_error={error:.4f} (larger median abs. % error of fps and runtime_s); labels: {legend}; {names}"
        ),
        fontsize=9,
    )
    tight_layout(fig)
    if path is not None:
        fig.savefig(path, dpi=90)
    return fig


def disagreements(checked, share: float = 0.15) -> list[str]:
    """Jobs whose fps or runtime_s the model missed by more than `share`, worst first."""
    off = sorted(checked, key=lambda c: -max(c.ape("fps"), c.ape("runtime_s")))
    return [
        f"{c.name}: fps predicted {c.predicted.fps:.0f}, measured {c.measured['fps']:.0f} ({c.ape('fps'):.0%} off); "
        f"runtime_s predicted {c.predicted.runtime_s:.1f}, measured {c.measured['runtime_s']:.1f} "
        f"({c.ape('runtime_s'):.0%} off); predicted bound: {c.predicted.bound}"
        for c in off
        if max(c.ape("fps"), c.ape("runtime_s")) > share
    ]


def validation_rows(checked) -> list[list]:
    return [
        [
            c.name,
            c.predicted.knobs["actors"],
            c.predicted.knobs["actor_threads"],
            c.predicted.knobs["sm_limit"],
            c.predicted.fps,
            c.measured["fps"],
            c.ape("fps"),
            c.predicted.runtime_s,
            c.measured["runtime_s"],
            c.ape("runtime_s"),
            c.predicted.bound,
        ]
        for c in checked
    ]


VALIDATION_HEADER = [
    "job",
    "actors",
    "threads",
    "units",
    "fps pred",
    "fps meas",
    "fps err",
    "runtime_s pred",
    "runtime_s meas",
    "runtime_s err",
    "predicted bound",
]
