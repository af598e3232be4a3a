"""The report's packing figure: a sweep's packs (pack=K, rlbench/sweeps/pack.py) as the node
throughput, the node's energy per task and the jobs' slowdown against K, each K's median over its
repeats with their range; beside the actor and SM scaling figures. docs/packing.md.
"""

from __future__ import annotations

from rlbench.core.metrics import NODE_ENERGY, NODE_FPS, NODE_SLOWDOWN
from rlbench.core.verdict import NODE_JUDGED, pack_verdicts, packing_lines, settings
from rlbench.report.figures import Drawn, _finish, medians, new_figure, plot_ranges
from rlbench.tracking.study_records import Study

RANGES = "points: the median of each pack size's repeats; whiskers: their min..max"  # the foot's, with whiskers
PANELS = (
    (NODE_FPS, "node throughput (env frames / s, the K jobs summed)"),
    (NODE_ENERGY, "node energy per task (J)"),
    (NODE_SLOWDOWN, "a job's slowdown against pack=1 (median of the pack's)"),
)


def packing(study: Study) -> Drawn:
    """Node throughput, energy per task and slowdown vs K; a panel whose figure no pack has says why."""
    name, title = "packing", "Packing: jobs per node against node throughput and energy per task"
    ks = sorted({p.k for p in study.packs})
    if len(ks) < 2:
        return Drawn(name, title, None, "needs packs of two or more sizes in one sweep (python -m rlbench -m pack=1,2)")
    fig = new_figure(13, 4.2)
    notes = []
    for ax, (metric, label) in zip(fig.subplots(1, 3), PANELS, strict=True):
        pts = medians([(p.k, p.metrics[metric]) for p in study.packs if p.metrics.get(metric) is not None])
        if pts:
            plot_ranges(ax, pts, label, f"{metric}|packs")
        else:
            why = next((p.nulls[metric] for p in study.packs if metric in p.nulls), "not logged")
            notes.append(f"{metric} not drawn: {why}")
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
        ax.set(xlabel="jobs per node (pack)", ylabel=label, xticks=ks, xlim=(min(ks) - 0.5, max(ks) + 0.5))
        ax.grid(alpha=0.3)
    note = "; ".join(notes)
    return _finish(Drawn(name, title, fig, note), study, f"{title} ({study.title})", note=note, ranges=RANGES)


def packing_verdict(study: Study) -> list[str]:
    """The verdicts on packing from the store's pack runs (the sweep's rule and floor minimum, as
    the terminal gave them at the sweep's end); [] where the study has no packs of two sizes."""
    if len({p.k for p in study.packs}) < 2:
        return []
    rows = [{"config": p.config, "repeat": p.repeat, "status": "FINISHED", **p.metrics} for p in study.packs]
    why = {m: next((p.nulls[m] for p in study.packs if m in p.nulls), "") for m in NODE_JUDGED}
    return packing_lines(pack_verdicts(rows, settings(study.parent_tags)[1]), why)
