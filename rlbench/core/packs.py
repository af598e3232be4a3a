"""The verdicts on packing (pack=K): the sweep's one rule (rlbench/core/verdict.py) over a sweep's
packs, once for the node's throughput and once for its energy per task, and their words. Pure:
the packs' rows are given (rlbench/sweeps/pack.py at a sweep's end, the report from the store).
"""

from __future__ import annotations

from rlbench.core.metrics import NODE_ENERGY, NODE_FPS
from rlbench.core.verdict import Verdict, judge_rows

NODE_JUDGED = (NODE_FPS, NODE_ENERGY)  # what the packs' verdicts compare
TAGS = {NODE_FPS: "packing_fps", NODE_ENERGY: "packing_energy"}  # the sweep parent's tags of those verdicts


def pack_verdicts(pack_rows: list[dict], floor_min: float) -> dict[str, Verdict]:
    """The node throughput's and the energy per task's verdicts over the packs (the sweep's one rule:
    medians over the repeats, told apart or not by their noise floor)."""
    return {
        m: judge_rows([r for r in pack_rows if r.get(m) is not None], m, floor_min) for m in (NODE_FPS, NODE_ENERGY)
    }


def packing_lines(verdicts: dict[str, Verdict], why: dict[str, str]) -> list[str]:
    """The terminal's words on packing: which K is best for each, told apart or not; where no pack
    has the figure, why (`why`: the first pack's reason)."""
    words = {NODE_FPS: "node throughput", NODE_ENERGY: "node energy per task"}
    return [
        f"Packing, {words[m]}: "
        + (v.answer() if v.best is not None else f"not compared: {why.get(m) or 'no pack has it'}")
        for m, v in verdicts.items()
    ]
