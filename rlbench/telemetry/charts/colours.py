"""One colour per operation name in every figure (telemetry.png, operations.png, the op bar
chart): a reader who learnt that env_step is blue in one panel finds it blue everywhere.
Colours follow the order of the operation names in the metric contract (rlbench.core.metrics.OPS,
each name once, roles in order), so they do not depend on which ops a job happened to time.
The operations: docs/metrics.md.
"""

from __future__ import annotations

from functools import cache

from rlbench.core.metrics import OPS, OTHER

_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
    "#393b79",
    "#637939",
)
_UNKNOWN = "#555555"


@cache
def _order() -> tuple[str, ...]:
    return tuple(dict.fromkeys(op for ops in OPS.values() for op in ops))


def op_colour(op: str) -> str:
    """The colour of an operation; `other` (untimed code) is light grey, an undeclared op dark grey."""
    if op == OTHER:
        return "#c7c7c7"
    order = _order()
    return _PALETTE[order.index(op) % len(_PALETTE)] if op in order else _UNKNOWN
