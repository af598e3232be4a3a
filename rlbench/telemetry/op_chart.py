"""A job's time per operation as a table (logged with mlflow.log_table: `operations.json`) and a
bar chart (`operations.png`): the `op_frac/<role>/<op>` metrics in one place, readable without
opening 20 single-point metric charts."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure

from rlbench.metrics import OPS, OTHER
from rlbench.telemetry.colours import op_colour

COLUMNS = ("role", "op", "fraction", "seconds")


def _rank(role: str, op: str) -> tuple[int, int, str]:
    roles, ops = list(OPS), OPS.get(role, ())
    role_rank = roles.index(role) if role in roles else len(roles)
    op_rank = len(ops) + 1 if op == OTHER else (ops.index(op) if op in ops else len(ops))
    return role_rank, op_rank, op


def op_breakdown_rows(metrics: dict, walls: dict[str, float] | None = None) -> list[dict]:
    """{role, op, fraction, seconds} per `op_frac/<role>/<op>` metric, in the contract's order
    (roles, then ops, `other` last); seconds = fraction x the role's wall time where known."""
    rows = []
    for key, value in metrics.items():
        parts = key.split("/")
        if len(parts) != 3 or parts[0] != "op_frac" or value is None:
            continue
        role, op = parts[1], parts[2]
        wall = (walls or {}).get(role)
        rows.append({"role": role, "op": op, "fraction": round(float(value), 4),
                     "seconds": round(float(value) * wall, 4) if wall else None})
    return sorted(rows, key=lambda r: _rank(r["role"], r["op"]))


def as_columns(rows: list[dict]) -> dict[str, list]:
    return {c: [r[c] for r in rows] for c in COLUMNS}


def plot_op_breakdown(rows: list[dict], path: Path, title: str) -> Path:
    """One horizontal stacked bar per role (share of its wall time per operation)."""
    roles = list(dict.fromkeys(r["role"] for r in rows))
    fig = Figure(figsize=(9, 1.0 + 0.8 * max(len(roles), 1)))
    ax = fig.subplots()
    left = dict.fromkeys(roles, 0.0)
    labelled = set()
    for r in rows:
        y = len(roles) - 1 - roles.index(r["role"])
        bar = ax.barh(y, r["fraction"], left=left[r["role"]], color=op_colour(r["op"]), edgecolor="white",
                      label=None if r["op"] in labelled else r["op"], gid=f"{r['role']}/{r['op']}")
        labelled.add(r["op"])
        if r["fraction"] >= 0.05:
            ax.bar_label(bar, labels=[f"{100 * r['fraction']:.0f}%"], label_type="center", fontsize=7)
        left[r["role"]] += r["fraction"]
    ax.set_yticks(range(len(roles)), list(reversed(roles)))
    ax.set(xlim=(0, 1.0), xlabel="share of the role's wall time (annotation cost removed)", title=title)
    if rows:
        ax.legend(fontsize=7, ncol=min(len(labelled), 6), loc="upper center", bbox_to_anchor=(0.5, -0.35))
    else:
        ax.text(0.5, 0.5, "no operation timed (telemetry off?)", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path
