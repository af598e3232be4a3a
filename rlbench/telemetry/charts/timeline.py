"""One PNG per job (telemetry.png): power and utilisation over time, with each role's
operations shaded, an operation still open at a tick counted up to it (OpTimer.snapshot).
The panels: docs/metrics.md, "Telemetry, inside".
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from rlbench.telemetry.charts.colours import op_colour
from rlbench.telemetry.charts.layout import tight_layout
from rlbench.telemetry.sources import plugged


def _series(rows: list[dict], key: str, t0: float):
    pts = [(r["t"] - t0, r[key]) for r in rows if r.get(key) is not None]
    return zip(*pts, strict=True) if pts else ((), ())


def _cpu_power(rows: list[dict], t0: float):
    pts = []
    for a, b in pairwise(rows):
        ea, eb = a.get("cpu_pkg_energy_j"), b.get("cpu_pkg_energy_j")
        if ea is not None and eb is not None and b["t"] > a["t"]:
            pts.append((b["t"] - t0, (eb - ea) / (b["t"] - a["t"])))
    return zip(*pts, strict=True) if pts else ((), ())


def op_shares(op_ticks: list, role: str) -> tuple[list[float], dict[str, list[float]]]:
    """Per-tick share of wall time in each op of `role`, from cumulative op totals."""
    times, shares = [], {}
    for (ta, a), (tb, b) in pairwise(op_ticks):
        dt = tb - ta
        if dt <= 0:
            continue
        times.append(tb)
        prev, cur = a.get(role, {}), b.get(role, {})
        for op in cur:
            shares.setdefault(op, [0.0] * (len(times) - 1))
        for op, series in shares.items():
            series.append(min(max((cur.get(op, 0.0) - prev.get(op, 0.0)) / dt, 0.0), 1.0))
    return times, shares


def op_steps(op_ticks: list, role: str) -> tuple[list[float], dict[str, list[float]]]:
    """op_shares as a step="pre" stackplot draws them: each share spans (the tick before, its
    tick], so x starts at the first op tick (the task's start) and each series repeats its first."""
    times, shares = op_shares(op_ticks, role)
    if not times or not shares:
        return [], {}
    return [op_ticks[0][0], *times], {op: [s[0], *s] for op, s in shares.items()}


def plot_timeline(rows: list[dict], op_ticks: list, path: Path) -> Path:
    t0 = rows[0]["t"] if rows else (op_ticks[0][0] if op_ticks else 0.0)
    fig = Figure(figsize=(10, 10))  # no pyplot: no global figure list, and the caller's backend stays
    FigureCanvasAgg(fig)
    ax_p, ax_u, *ax_ops = fig.subplots(4, 1, sharex=True)
    gpu_keys = sorted({k for r in rows for k in r if k.startswith("gpu") and k.endswith("_power_w")})
    for k in gpu_keys:
        ax_p.plot(*_series(rows, k, t0), label=f"{k[:-8]} power (NVML)")
    cpu_t, cpu_w = _cpu_power(rows, t0)
    if cpu_t:
        ax_p.plot(cpu_t, cpu_w, label="CPU package power (RAPL)")
    meters = [k for k in (f"power_{n}_w" for n in plugged()) if any(r.get(k) is not None for r in rows)]
    for k in meters:  # the plugged-in power meters (rlbench/telemetry/sources.py)
        ax_p.plot(*_series(rows, k, t0), label=f"{k[6:-2]} power")
    if not gpu_keys and not cpu_t and not meters:
        ax_p.text(
            0.5,
            0.5,
            "no power measured on this host (see the run's `unmeasured` tag)",
            ha="center",
            va="center",
            transform=ax_p.transAxes,
        )
    ax_p.set_ylabel("W")
    ax_p.set_title("power")
    for k, label in [("cpu_util", "CPU, system"), ("proc_util", "CPU, this job")] + [
        (k, f"{k[:-5]} util (NVML)")
        for k in sorted({k for r in rows for k in r if k.startswith("gpu") and k.endswith("_util") and "mem" not in k})
    ]:
        ax_u.plot(*_series(rows, k, t0), label=label)
    ax_u.set_ylabel("fraction")
    ax_u.set_ylim(0, 1.05)
    for ax, role in zip(ax_ops, ("actors", "learner"), strict=True):
        x, shares = op_steps(op_ticks, role)
        if shares:
            ops = list(shares)
            ax.stackplot(
                [t - t0 for t in x],
                *shares.values(),
                labels=ops,
                colors=[op_colour(op) for op in ops],
                alpha=0.8,
                step="pre",
            )
        ax.set_ylabel(f"{role}\nshare of time")
        ax.set_ylim(0, 1.05)
    ax_ops[-1].set_xlabel("seconds since the task started")
    for ax in (ax_p, ax_u, *ax_ops):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize="small")
    tight_layout(fig)
    fig.savefig(path, dpi=80)
    return path
