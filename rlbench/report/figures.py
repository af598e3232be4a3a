"""The study's figures, redrawn from a `Study` (rlbench.tracking.study_records); one function each.

Each returns a `Drawn` (the figure, or None and why not), never draws an unmeasured value as
zero, tags every series with a gid `<metric>|<group>`, and uses no pyplot; `all_figures` lists
them. The conventions: docs/metrics.md, "The report, inside".
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator, ScalarFormatter

from rlbench.core.metrics import OPS, OTHER
from rlbench.core.verdict import Verdict
from rlbench.report.findings import algorithm_shares, precision, study_verdict
from rlbench.report.never_measured import never_measured, one_line
from rlbench.report.rules import learner_ceiling_fps, pareto
from rlbench.report.rules import on_off_policy as compare
from rlbench.report.series import actor_axis, series
from rlbench.telemetry.charts.colours import op_colour
from rlbench.telemetry.charts.layout import tight_layout
from rlbench.telemetry.charts.operations import legend_below, op_handles
from rlbench.tracking.study_records import JobRun, Study

TITLE_SIZE, FOOT_SIZE, LEGEND_SIZE = 12.0, 8.0, 8.0  # points
# The report shows a figure at most ~1000 px wide (a 1000 px window): an 11-inch figure's 10 pt
# text is 12.6 px there, a 15-inch one's 9.3 px; so figures are 11 inches wide and the operations
# legend, one colour per operation, has 10 pt text.
OPS_LEGEND_SIZE = 10.0
LINE_SPACING = 1.2  # matplotlib's, in font sizes per line
PAD = 0.12  # inches around a band of text
# The foot's line on a figure that draws a whisker (plot_ranges): what its points and whiskers are
RANGES = (
    "points: the median of each configuration's finished runs; whiskers: their min..max "
    "(n per point: the report's Configurations table)"
)


@dataclass
class Drawn:
    name: str  # file stem, e.g. fig3_actor_scaling
    title: str
    fig: Figure | None
    note: str = ""  # why not drawn, or what was left out


def _fps_units(study: Study) -> str:
    skip = f", frameskip {study.frameskip}" if study.frameskip else ""
    return f"env frames/s{skip}"


# --- text that fits: wrap to the width there is, grow the figure by the height it takes ---


def new_figure(width: float, height: float) -> Figure:
    """A figure (inches) with an Agg canvas of its own, so its text can be measured
    (fig.canvas.get_renderer()) and laid out without pyplot."""
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _chars_across(width_in: float, fontsize: float) -> int:
    """How many characters of text at `fontsize` fit in `width_in` inches."""
    return max(int(width_in * 72 / (0.6 * fontsize)), 20)  # 0.6 em: a generous mean glyph width for DejaVu Sans


def _height(text: str, fontsize: float) -> float:
    """Inches that `text`'s lines take at `fontsize` (0 for no text)."""
    return (text.count("\n") + 1) * fontsize * LINE_SPACING / 72 if text else 0.0


def _grow(fig: Figure, inches: float) -> None:
    """Make the figure taller by `inches` (the panels are laid out again afterwards)."""
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + inches)


def _fill(text: str, width: int) -> str:
    """`text` wrapped at `width` characters on word boundaries (a word longer than a line, e.g.
    a path, is split, as it could not fit otherwise)."""
    return textwrap.fill(text, width, break_on_hyphens=False)


def _footer_text(study: Study, note: str, width: int, verdict: Verdict | None = None) -> str:
    """The note, the verdict's answer (the report's Result's: the same words as the report's
    verdict and the sweep's; None: a figure drawn alone judges its study), the host, and the jobs
    not plotted (failed, killed, missing), wrapped at `width`."""
    v = verdict or study_verdict(study)
    note = f"{note}\nverdict: {v.answer()}" if v.comparisons else note
    left_out = [
        f"{j.name}: {j.status}" + (f" ({textwrap.shorten(j.error, 80, placeholder=' ...')})" if j.error else "")
        for j in study.not_finished
    ]
    left_out += study.missing
    lines = [*note.splitlines(), study.host_label()] + ([f"not plotted: {'; '.join(left_out)}"] if left_out else [])
    return "\n".join(_fill(line, width) for line in lines if line)


def draws_ranges(fig: Figure) -> bool:
    """Whether `fig` draws a min..max whisker (plot_ranges' gid `<metric>|<group>|range`)."""
    return any((a.get_gid() or "").endswith("|range") for a in fig.findobj())


def _finish(
    drawn: Drawn,
    study: Study,
    suptitle: str,
    note: str = "",
    legend: list | None = None,
    legend_size: float = LEGEND_SIZE,
    verdict: Verdict | None = None,
    ranges: str = RANGES,
) -> Drawn:
    """Title at the head; the legend (handles shared by all panels), `ranges` where the figure
    draws whiskers, the note, the host and the left-out jobs at the foot; the panels laid out
    between. The figure grows by the height of head and foot, so the panels keep their size and
    no line is cut at the edge."""
    fig = drawn.fig
    width = fig.get_figwidth()
    note = "\n".join(filter(None, [ranges if draws_ranges(fig) else "", note]))
    head = _fill(suptitle, _chars_across(0.96 * width, TITLE_SIZE))
    foot = _footer_text(study, note, _chars_across(0.98 * width, FOOT_SIZE), verdict)
    head_in, foot_in = _height(head, TITLE_SIZE) + PAD, _height(foot, FOOT_SIZE) + PAD
    box = legend_below(fig, legend, legend_size) if legend else None
    legend_in = box.get_window_extent(fig.canvas.get_renderer()).height / fig.dpi + PAD if box else 0.0
    _grow(fig, head_in + legend_in + foot_in)
    height = fig.get_figheight()
    fig.suptitle(head, fontsize=TITLE_SIZE, y=1 - PAD / 2 / height, va="top", in_layout=False)  # rect keeps its room
    fig.text(0.01, PAD / 2 / height, foot, fontsize=FOOT_SIZE, va="bottom")
    if box:
        box.set_bbox_to_anchor((0.5, foot_in / height), transform=fig.transFigure)
    tight_layout(fig, rect=(0, (foot_in + legend_in) / height, 1, 1 - head_in / height))
    return drawn


# --- the figures ---


def medians(pts: list[tuple[float, float]]) -> list[tuple[float, float, float, float]]:
    """(x, median, min, max) of the values at each x, sorted by x: a configuration's repeats
    become one point with its range."""
    by_x: dict[float, list[float]] = {}
    for x, y in pts:
        by_x.setdefault(x, []).append(y)
    return [(x, statistics.median(ys), min(ys), max(ys)) for x, ys in sorted(by_x.items())]


# A panel's series after its first: dashed, other markers, so that one lying on another (the
# actors' fps and the task's where the actors step the whole task, e.g. CartPole) stays in sight.
SERIES_STYLES = ({"marker": "o"}, {"marker": "x", "ls": "--", "ms": 8}, {"marker": "s", "ls": ":", "mfc": "none"})


def plot_ranges(
    ax, pts: list[tuple[float, float, float, float]], label: str, gid: str, style: dict | None = None
) -> None:
    """The medians as a line (`style`: its matplotlib line style, default a solid line with dots),
    each with its min..max bar where repeats differ (gid `<gid>|range`)."""
    xs, ys, lo, hi = zip(*pts, strict=True)
    line = ax.plot(xs, ys, label=label, gid=gid, **(style or SERIES_STYLES[0]))[0]
    if any(h > low for low, h in zip(lo, hi, strict=True)):
        bars = ax.errorbar(
            xs,
            ys,
            yerr=[[y - low for y, low in zip(ys, lo, strict=True)], [h - y for y, h in zip(ys, hi, strict=True)]],
            fmt="none",
            ecolor=line.get_color(),
            capsize=0,
            elinewidth=1.2,
        )
        bars.lines[2][0].set_gid(f"{gid}|range")


def _plot_metric(ax, groups, x_key: str, metric: str, label: str, transform=None, style=None) -> None:
    """One line per group through each configuration's median, with its min..max; jobs without
    the metric are skipped (see `_absent`)."""
    for g, js in groups.items():
        have = medians([(j.knob(x_key), j.value(metric)) for j in js if j.value(metric) is not None])
        if transform and have:
            have = transform(have)
        if have:
            name = label if label and g == "all jobs" else f"{label} {g}".strip()
            plot_ranges(ax, have, name, f"{metric}|{g}", style)


def scaling_series(groups: dict[str, list[JobRun]], x_key: str, what: str) -> tuple[dict[str, list[JobRun]], str]:
    """The series with two or more values of `x_key` (a line that can show scaling), and the
    foot's line naming the others: a single configuration is its own baseline (e.g. the GPU
    study's SM limits, each run at one actor count, in the actor scaling figure)."""
    kept = {g: js for g, js in groups.items() if len({j.knob(x_key) for j in js}) >= 2}
    left = [g for g in groups if g not in kept]
    return kept, f"not drawn, at one {what} only: {'; '.join(left)}" if left else ""


def _log2_axis(ax, values) -> None:
    """Log-2 x axis labelled with the swept values themselves (4, 40, 256, ...)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())


def _normalise_to_first(pts):
    """Each (x, median, min, max) over the median at the fewest actors."""
    base = pts[0][1]
    return [(x, y / base, lo / base, hi / base) for x, y, lo, hi in pts]


def _actor_panel(ax, groups, metrics, ylabel: str) -> None:
    """One panel of the actor scaling figure: a line per metric and group (jobs without the metric skipped)."""
    for i, (metric, label, transform) in enumerate(metrics):
        _plot_metric(ax, groups, "actors", metric, label, transform, SERIES_STYLES[i % len(SERIES_STYLES)])
    ax.set(xlabel="actors (environment instances)", ylabel=ylabel)
    _log2_axis(ax, [j.actors for js in groups.values() for j in js])
    ax.legend(fontsize=LEGEND_SIZE)
    ax.grid(alpha=0.3)


POWER_PANEL = "average power (W)"


def _idle_line(ax, watts: float) -> None:
    """The GPU's idle power (measured before a sweep's first job: sweep.idle_power_s) across the power panel."""
    ax.axhline(
        watts,
        color="grey",
        ls="--",
        lw=1.0,
        gid="idle_power_gpu_w",
        label=f"GPU idle ({watts:.0f} W, NVML, before the first job)",
    )
    ax.legend(fontsize=LEGEND_SIZE)


def actor_panels(study: Study) -> list[tuple[str, list]]:
    """The actor scaling figure's panels: (y label, [(metric, label, transform)]), in reading order."""
    fps = _fps_units(study)
    return [
        ("runtime / runtime at fewest actors", [("runtime_s", "", _normalise_to_first)]),
        (f"fps ({fps})", [("fps", "actors' fps", None), ("task_fps", "task's fps (frames / runtime_s)", None)]),
        (POWER_PANEL, [("power_gpu_w_avg", "GPU", None), ("power_cpu_w_avg", "CPU pkg", None)]),
        (f"perf per watt ({fps} / W)", [("perf_per_watt", "", None)]),
        (
            "energy per task (J)",
            [("energy_per_task_j", "total", None), ("energy_gpu_j", "GPU", None), ("energy_cpu_j", "CPU pkg", None)],
        ),
    ]


TASK = (
    "task = the same frame target and learner updates (the actors may step past the target until the last "
    "update has its unrolls; fps and task_fps count every frame stepped)"
)


def actor_scaling(study: Study, verdict: Verdict | None = None) -> Drawn:
    """The study's Figure 3: runtime (normalised), the actors' and the task's fps, power, perf/W
    and energy per task vs actors. A panel or series no job measured is left out, and the
    figure's foot names it once with the reasons (never_measured)."""
    name, title = "fig3_actor_scaling", "Scaling the actors, as in the paper's Figure 3"
    groups, single = scaling_series(series(study.finished, "actors", "actors"), "actors", "actor count")
    jobs = [j for js in groups.values() for j in js]
    if not groups:
        return Drawn(name, title, None, "needs finished jobs at two or more actor counts (the other knobs fixed)")
    panels = actor_panels(study)
    absent = never_measured(jobs, [m for _, metrics in panels for m, _, _ in metrics])
    shown = [(y, kept) for y, metrics in panels if (kept := [m for m in metrics if m[0] not in absent])]
    rows = -(-len(shown) // 2)
    fig = new_figure(11, 3.9 * rows)
    axes = list(fig.subplots(rows, 2, squeeze=False).flat)
    # axes come in pairs: an odd panel count leaves the last one, removed below
    for ax, (ylabel, metrics) in zip(axes, shown, strict=False):
        _actor_panel(ax, groups, metrics, ylabel)
        if ylabel == POWER_PANEL and study.idle_power_w is not None:
            _idle_line(ax, study.idle_power_w)
    for ax in axes[len(shown) :]:
        fig.delaxes(ax)
    line = one_line(absent)
    sub = f"{title} ({study.title}); baseline: each series' fewest actors; {TASK}"
    return _finish(
        Drawn(name, title, fig, line), study, sub, note="\n".join(filter(None, [line, single])), verdict=verdict
    )


def sm_scaling(study: Study, verdict: Verdict | None = None) -> Drawn:
    """The study's Figure 4: slowdown vs granted compute units and vs CPU/GPU ratio (not without
    a GPU: the verdict says why), fixed actors."""
    name, title = "fig4_sm_scaling", "Limiting the learner's and inference's compute units, as in the paper's Figure 4"
    groups, single = scaling_series(series(study.finished, "sm_granted", "sm_limit"), "sm_granted", "unit count")
    if not groups:
        return Drawn(name, title, None, "needs finished jobs at two or more granted unit counts at fixed actors")
    panels = [
        ("sm_granted", f"granted {study.compute_unit}s"),
        ("cpu_gpu_ratio", "CPU/GPU ratio (actor threads / units)"),
    ][: 1 if study.without_gpu else 2]
    fig = new_figure(5.5 * len(panels), 4.3)
    for ax, (x_key, xlabel) in zip(fig.subplots(1, len(panels), squeeze=False).flat, panels, strict=True):
        for g, js in groups.items():
            most = max(j.knob("sm_granted") for j in js)
            base = statistics.median(j.value("runtime_s") for j in js if j.knob("sm_granted") == most)
            pts = medians([(j.knob(x_key), j.value("runtime_s") / base) for j in js])
            plot_ranges(ax, pts, f"{g} (baseline {most:.0f} units, its median)", f"slowdown_vs_{x_key}|{g}")
        ax.axhline(1.0, color="grey", lw=0.8)
        if x_key == "cpu_gpu_ratio":
            ax.axvline(1.0, color="tab:red", ls="--", lw=0.8, label="study's rule: ratio >= 1")
        _log2_axis(ax, [j.knob(x_key) for js in groups.values() for j in js])
        ax.set(xlabel=xlabel, ylabel="slowdown (runtime / runtime with most units)")
        ax.legend(fontsize=LEGEND_SIZE)
        ax.grid(alpha=0.3)
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title})", note=single, verdict=verdict)


def _role_ops(jobs: list[JobRun], role: str) -> list[str]:
    """The operations some job timed for `role`: the contract's order, `other`, then undeclared ones."""
    logged = {k.split("/")[2] for j in jobs for k in j.metrics if k.startswith(f"op_frac/{role}/")}
    known = (*OPS.get(role, ()), OTHER)
    return [op for op in known if op in logged] + sorted(logged - set(known))


def _op_bars(ax, jobs: list[JobRun], role: str, ops: list[str]) -> None:
    """One stacked bar per job: the role's share of wall time per operation, each in op_colour(op)."""
    left = [0.0] * len(jobs)
    for op in ops:
        widths = [j.value(f"op_frac/{role}/{op}") or 0.0 for j in jobs]  # an op a job never ran: no time
        bars = ax.barh([j.name for j in jobs], widths, left=left, label=op, color=op_colour(op))
        for patch in bars:
            patch.set_gid(f"op_frac/{role}/{op}")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set(
        title=role if ops else f"{role}: no operations logged",
        xlabel="share of wall time",
        xlim=(0, 1.05),
        xticks=[0, 0.25, 0.5, 0.75, 1],
    )


def operations(study: Study, verdict: Verdict | None = None) -> Drawn:
    """Time per operation, per job, as stacked bars (one panel per role). An operation has one
    colour in every panel (op_colour) and one entry in the figure's single legend."""
    name, title = "operations", "Time per operation (share of each role's wall time)"
    jobs = [j for j in study.finished if any(k.startswith("op_frac/") for k in j.metrics)]
    if not jobs:
        return Drawn(name, title, None, "no job logged op_frac/<role>/<op> (telemetry off, or none finished)")
    fig = new_figure(11, 0.5 * len(jobs) + 2.0)
    drawn_ops: list[str] = []
    for ax, role in zip(fig.subplots(1, 3, sharey=True), ("actors", "inference", "learner"), strict=True):
        ops = _role_ops(jobs, role)
        _op_bars(ax, jobs, role, ops)
        drawn_ops += ops
    sub = f"{title} ({study.title}); corrected for annotation cost"
    return _finish(
        Drawn(name, title, fig), study, sub, legend=op_handles(drawn_ops), legend_size=OPS_LEGEND_SIZE, verdict=verdict
    )


def gpu_busy(study: Study, verdict: Verdict | None = None) -> Drawn:
    """GPU-busy fraction (CUDA events) beside NVML utilisation, per job."""
    name, title = "gpu_busy", "GPU busy (CUDA events) vs NVML utilisation"
    jobs = study.finished
    if not any(j.value("gpu_busy_frac") is not None or j.value("gpu_util_avg") is not None for j in jobs):
        reason = jobs[0].why_missing("gpu_busy_frac") if jobs else "no finished job"
        return Drawn(name, title, None, f"not measured: {reason}")
    fig = new_figure(max(6, 0.8 * len(jobs) + 2), 4.0)
    ax = fig.subplots()
    xs = range(len(jobs))
    for off, metric in ((-0.2, "gpu_busy_frac"), (0.2, "gpu_util_avg")):
        have = [(x + off, j.value(metric)) for x, j in zip(xs, jobs, strict=True) if j.value(metric) is not None]
        if have:
            bars = ax.bar(*zip(*have, strict=True), width=0.4, label=metric)
            for patch in bars:
                patch.set_gid(metric)
    ax.set_xticks(list(xs), [j.name for j in jobs], rotation=30, ha="right", fontsize=7)
    ax.set(ylabel="fraction of runtime", ylim=(0, 1.05))
    ax.legend()
    sub = f"{title} ({study.title}); NVML counts any kernel running"
    return _finish(Drawn(name, title, fig), study, sub, verdict=verdict)


def pareto_front(study: Study, verdict: Verdict | None = None) -> Drawn:
    """A search's trials: fps vs energy per task, the non-dominated ones joined."""
    name, title = "pareto_front", "Search: fps vs energy per task"
    jobs = [j for j in study.finished if j.value("fps") is not None and j.value("energy_per_task_j") is not None]
    if not jobs:
        reason = study.finished[0].why_missing("energy_per_task_j") if study.finished else "no finished trial"
        return Drawn(name, title, None, f"energy per task not measured: {reason}")
    pts = [(j.value("fps"), j.value("energy_per_task_j")) for j in jobs]
    front = sorted(pareto(pts), key=lambda i: pts[i][0])
    fig = new_figure(7, 4.5)
    ax = fig.subplots()
    ax.scatter(*zip(*pts, strict=True), color="tab:grey", label="trials", gid="trials")
    ax.plot(
        [pts[i][0] for i in front],
        [pts[i][1] for i in front],
        "o-",
        color="tab:red",
        label="Pareto front",
        gid="pareto",
    )
    for j, (f, e) in zip(jobs, pts, strict=True):
        ax.annotate(f"{j.name} (ratio {j.knob('cpu_gpu_ratio') or float('nan'):.2g})", (f, e), fontsize=6)
    ax.set(xlabel=f"fps ({_fps_units(study)}), higher is better", ylabel="energy per task (J), lower is better")
    ax.legend()
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title})", verdict=verdict)


ONOFF_NOTE = (
    "RL-Scope measured single-process TF/PyTorch implementations (PPO2, A2C vs DDPG, SAC, TD3) with "
    "simulation in the training loop; here both run SEED RL's central-inference pipeline, the actors "
    "stepping beside the learner, on the same env, actors and task frames."
)


def on_off_policy(study: Study, verdict: Verdict | None = None) -> Drawn:
    """Per algorithm: its share of the task in env stepping and in the learner (RL-Scope's
    on- vs off-policy comparison), with the ratio of simulation-boundness."""

    name, title = "onoff_policy", "On- vs off-policy: where the task's time goes"
    shares = algorithm_shares(study)
    found = compare(shares)
    if found is None:
        return Drawn(
            name,
            title,
            None,
            "needs finished jobs of an on-policy (vtrace) and an off-policy algorithm "
            f"with sim_share; this study has: {sorted(shares) or 'none'}",
        )
    fig = new_figure(8, 4.2)
    ax = fig.subplots()
    algos = [found.on, found.off]
    for off, (metric, values) in (
        (-0.2, ("sim_share", found.sim_share)),
        (0.2, ("learner_share", found.learner_share)),
    ):
        have = [(i + off, values[a]) for i, a in enumerate(algos) if values.get(a) is not None]
        bars = ax.bar(
            *zip(*have, strict=True),
            width=0.4,
            label=metric,
            color="tab:green" if metric == "sim_share" else "tab:purple",
        )
        for patch in bars:
            patch.set_gid(metric)
    ax.set_xticks(range(len(algos)), [f"{found.on} (on-policy)", f"{found.off} (off-policy)"])
    ratio = "n/a" if found.ratio is None else f"{found.ratio:.2f}x"
    ax.set(
        ylabel="share of the task's runtime",
        ylim=(0, 1.05),
        title=f"simulation-boundness {found.on} / {found.off}: {ratio} (RL-Scope: >= 3.5x)",
    )
    ax.legend()
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title})", note=ONOFF_NOTE, verdict=verdict)


def precision_scaling(study: Study, verdict: Verdict | None = None) -> Drawn:
    """runtime_s and fps vs actors, one line per precision (and per other knob that differs):
    how low-precision math moves the best actor count (the verdict's `precision` line)."""

    name, title = "precision_scaling", "Precision: task time and fps vs actors per precision"
    precisions = {precision(j) for j in study.finished}
    if len(precisions) < 2:
        return Drawn(
            name,
            title,
            None,
            f"needs finished jobs at two or more precisions; this study has {sorted(precisions) or 'none'}",
        )
    groups = series(study.finished, "actors", "actors")
    fig = new_figure(11, 4.2)
    ax_rt, ax_fps = fig.subplots(1, 2)
    _actor_panel(ax_rt, groups, [("runtime_s", "runtime_s", None)], "runtime_s (s)")
    _actor_panel(ax_fps, groups, [("fps", "fps", None)], f"fps ({_fps_units(study)})")
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title}); {TASK}", verdict=verdict)


def actor_hosts_scaling(study: Study, verdict: Verdict | None = None) -> Drawn:
    """fps and runtime_s vs actor hosts (or actor processes), with the learner's rate as the
    ceiling: on fps, the task's frames over the learner's busy time (learner_ceiling_fps); on
    runtime_s, that busy time as the floor (the task cannot end before its learner)."""

    name, title = "actor_hosts_scaling", "Scaling out: actor hosts (or processes) per learner"
    axis = actor_axis(study.finished)
    if axis is None:
        return Drawn(name, title, None, "needs finished jobs at two or more actor_hosts (or actor_procs)")
    what = axis.replace("_", " ")
    jobs = sorted(study.finished, key=lambda j: j.knob(axis) or 0)
    fig = new_figure(11, 4.2)
    ax_fps, ax_rt = fig.subplots(1, 2)
    for ax, metric, label in ((ax_fps, "fps", f"fps ({_fps_units(study)})"), (ax_rt, "runtime_s", "runtime_s (s)")):
        pts = [(j.knob(axis), j.value(metric)) for j in jobs if j.value(metric) is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"{metric} (measured)", gid=f"{metric}|all jobs")
        ceiling = [
            (j.knob(axis), c if metric == "fps" else j.value("frames") / c)
            for j in jobs
            if (c := learner_ceiling_fps(j.metrics)) is not None
        ]
        if ceiling:
            ax.plot(
                *zip(*ceiling, strict=True),
                ls="--",
                color="k",
                label="the learner's rate" if metric == "fps" else "the learner's busy time",
                gid=f"learner_ceiling|{metric}",
            )
        ax.set(xlabel=what, ylabel=label)
        _log2_axis(ax, [j.knob(axis) for j in jobs])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=LEGEND_SIZE)
    missing = [j.name for j in jobs if learner_ceiling_fps(j.metrics) is None]
    note = (
        f"the learner's rate not drawn for {', '.join(missing)} (no learner_share, frames or runtime_s)"
        if missing
        else ""
    )
    sub = (
        f"{title} ({study.title}); the learner's rate: the task's frames / the learner's busy time "
        f"(learner_share x runtime_s); {TASK}"
    )
    return _finish(Drawn(name, title, fig, note), study, sub, note=note, verdict=verdict)


def all_figures(study: Study, verdict: Verdict | None = None) -> list[Drawn]:
    """Every figure of the study; verdict: the report's (its Result's), judged here once if None."""
    v = verdict or study_verdict(study)
    figs = [
        actor_scaling(study, v),
        sm_scaling(study, v),
        operations(study, v),
        gpu_busy(study, v),
        on_off_policy(study, v),
        precision_scaling(study, v),
        actor_hosts_scaling(study, v),
    ]
    if study.kind == "study":
        figs.append(pareto_front(study, v))
    return figs
