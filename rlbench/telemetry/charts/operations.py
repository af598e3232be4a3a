"""A job's time per operation as a table (`operations.json`, mlflow.log_table) and a bar chart
(`operations.png`): the `op_frac/<role>/<op>` metrics in one place (docs/metrics.md). No MLflow
and no pyplot here (Agg canvases of their own); each operation in `op_colour(op)`, its colour in
every figure.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rlbench.core.metrics import OPS, OTHER
from rlbench.telemetry.charts.colours import op_colour
from rlbench.telemetry.charts.layout import tight_layout

COLUMNS = ("role", "op", "fraction", "seconds")
LABEL_MIN = 0.05  # segments at least this share of the bar get their percentage written on them
WIDTH_IN, DPI = 9.0, 100  # 900 px wide


def _parse(key: str) -> tuple[str, str] | None:
    """(role, op) of an `op_frac/<role>/<op>` metric name, else None."""
    parts = key.split("/")
    return (parts[1], parts[2]) if len(parts) == 3 and parts[0] == "op_frac" else None


def _rank(role: str, op: str) -> tuple:
    """Sort key: the contract's roles (actors, inference, learner) then others by name; in a
    role, the contract's op order, then undeclared ops by name, `other` last."""
    roles, ops = list(OPS), OPS.get(role, ())
    role_rank = roles.index(role) if role in roles else len(roles)
    op_rank = len(ops) + 1 if op == OTHER else ops.index(op) if op in ops else len(ops)
    return role_rank, role, op_rank, op


def op_breakdown_rows(metrics: dict, walls: dict[str, float] | None = None) -> list[dict]:
    """{role, op, fraction, seconds} per finite `op_frac/<role>/<op>` entry of a job's final
    `metrics` (others ignored), in the contract's order; fraction rounded to 4 decimals,
    seconds = fraction x the role's wall time where `walls` gives it, else None."""
    rows = []
    for key, value in metrics.items():
        found = _parse(key)
        if found is None or value is None or not math.isfinite(value):
            continue
        role, op = found
        wall = (walls or {}).get(role)
        rows.append(
            {
                "role": role,
                "op": op,
                "fraction": round(float(value), 4),
                "seconds": None if wall is None else round(float(value) * wall, 4),
            }
        )
    return sorted(rows, key=lambda r: _rank(r["role"], r["op"]))


def as_columns(rows: list[dict]) -> dict[str, list]:
    """The rows as {column: values}, the form mlflow.log_table takes."""
    return {c: [r[c] for r in rows] for c in COLUMNS}


def op_handles(ops) -> list[Patch]:
    """Legend handles: each operation once, in the order given, `other` last, in op_colour(op)."""
    ordered = [op for op in dict.fromkeys(ops) if op != OTHER] + ([OTHER] if OTHER in ops else [])
    return [Patch(facecolor=op_colour(op), label=op, gid=f"legend/{op}") for op in ordered]


def legend_below(fig: Figure, handles: list, fontsize: float = 8):
    """One figure legend at the bottom centre in as many columns as fit across the figure
    (measured with the figure's renderer); the caller reserves its height and anchors it."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(len(handles), 0, -1):
        box = fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=fontsize, frameon=False)
        if ncol == 1 or box.get_window_extent(renderer).width <= 0.98 * fig.bbox.width:
            return box
        box.remove()
    return None


def _ink(colour: str) -> str:
    """Black or white, whichever reads on `colour`."""
    r, g, b = to_rgb(colour)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def _segments(ax, rows: list[dict], roles: list[str]) -> None:
    """Each row as a segment of its role's bar (y = the role's index), percentages on wide ones."""
    left = dict.fromkeys(roles, 0.0)
    for r in rows:
        y, x, width, colour = roles.index(r["role"]), left[r["role"]], r["fraction"], op_colour(r["op"])
        ax.barh(
            y,
            width,
            left=x,
            height=0.6,
            color=colour,
            edgecolor="white",
            linewidth=0.5,
            label=r["op"],
            gid=f"{r['role']}/{r['op']}",
        )
        if width >= LABEL_MIN:
            ax.text(
                x + width / 2,
                y,
                f"{100 * width:.0f}%",
                ha="center",
                va="center",
                fontsize=8,
                color=_ink(colour),
                gid=f"pct/{r['role']}/{r['op']}",
            )
        left[r["role"]] += width
    ax.set_xlim(0, max(1.0, *left.values()) if left else 1.0)


def op_breakdown_figure(rows: list[dict], title: str) -> Figure:
    """One horizontal stacked bar per role: its share of wall time per operation (`other`
    included), roles top to bottom in the rows' order, one legend naming each op once."""
    roles = list(dict.fromkeys(r["role"] for r in rows))
    fig = Figure(figsize=(WIDTH_IN, 1.4 + 0.55 * max(len(roles), 1)), dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    _segments(ax, rows, roles)
    ax.set_yticks(range(len(roles)), roles)
    if roles:
        ax.set_ylim(len(roles) - 0.5, -0.5)  # the first role on top
    ax.set_xlabel("share of the role's wall time")
    ax.set_title(textwrap.fill(title, 80), fontsize=11)
    if not rows:
        ax.text(0.5, 0.5, "no operation timed (telemetry off?)", ha="center", va="center", transform=ax.transAxes)
    box = legend_below(fig, op_handles([r["op"] for r in rows])) if rows else None
    legend_in = box.get_window_extent(fig.canvas.get_renderer()).height / DPI + 0.1 if box else 0.0
    fig.set_size_inches(WIDTH_IN, fig.get_figheight() + legend_in)
    tight_layout(fig, rect=(0, legend_in / fig.get_figheight(), 1, 1))
    return fig


def plot_op_breakdown(rows: list[dict], path: Path, title: str) -> Path:
    """Save `op_breakdown_figure(rows, title)` as a 900 px wide PNG at `path`."""
    op_breakdown_figure(rows, title).savefig(path, dpi=DPI)
    return Path(path)
