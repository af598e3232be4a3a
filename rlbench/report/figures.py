"""The study's figures, redrawn from a `Study` (rlbench.report.records); one function each.

Every function returns a `Drawn`: the figure, or None and the reason it could not be drawn
(a value that was not measured is never drawn as zero). Each plotted series carries a gid
`<metric>|<group>` so tests and notebooks can read back exactly what was drawn. Every
figure names the host, the units (env frames, not agent steps) and its baseline, and lists
the jobs it could not plot (failed, killed, missing). Figures are plain matplotlib `Figure`s
(no pyplot): nothing global is touched, and a notebook shows them as PNG (html.png_bytes).
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator, ScalarFormatter

from rlbench.metrics import OPS, OTHER
from rlbench.report.records import JobRun, Study
from rlbench.report.verdict import pareto
from rlbench.telemetry.colours import op_colour

GROUP_KEYS = ("actors", "env.id", "actor_threads", "sm_limit", "inference_batch", "workload.name")


@dataclass
class Drawn:
    name: str                 # file stem, e.g. fig3_actor_scaling
    title: str
    fig: Figure | None
    note: str = ""            # why not drawn, or what was left out


def series(jobs: list[JobRun], x_key: str, vary: str) -> dict[str, list[JobRun]]:
    """Jobs with `x_key`, one series per combination of the other knobs that differ across
    `jobs` (named by them, e.g. `sm_limit=8`; `all jobs` when nothing else differs)."""
    jobs = [j for j in jobs if j.knob(x_key) is not None]
    fixed = [k for k in GROUP_KEYS if k != vary and len({j.params.get(k) for j in jobs}) > 1]
    groups: dict[str, list[JobRun]] = defaultdict(list)
    for j in jobs:
        groups[" ".join(f"{k}={j.params.get(k)}" for k in fixed) or "all jobs"].append(j)
    return {g: sorted(js, key=lambda j: j.knob(x_key)) for g, js in groups.items()}


def _fps_units(study: Study) -> str:
    skip = f", frameskip {study.frameskip}" if study.frameskip else ""
    return f"env frames/s{skip}"


def _footer(fig: Figure, study: Study) -> None:
    left_out = [f"{j.name}: {j.status}" + (f" ({j.error[:60]})" if j.error else "") for j in study.not_finished]
    left_out += study.missing
    lines = [study.host_label()] + ([f"not plotted: {'; '.join(left_out)}"] if left_out else [])
    fig.text(0.01, 0.005, "\n".join(lines), fontsize=7, va="bottom", wrap=True)


def _finish(drawn: Drawn, study: Study, suptitle: str, bottom: float, top: float) -> Drawn:
    """Title, host and left-out jobs at the foot, and the layout between them."""
    drawn.fig.suptitle(suptitle)
    _footer(drawn.fig, study)
    drawn.fig.tight_layout(rect=(0, bottom, 1, top))
    return drawn


def _plot_metric(ax, groups, x_key: str, metric: str, label: str, transform=None) -> list[str]:
    """One line per group; jobs without the metric are skipped, their reasons returned."""
    missing = []
    for g, js in groups.items():
        pts = [(j.knob(x_key), j.value(metric)) for j in js]
        have = [(x, y) for x, y in pts if y is not None]
        missing += [f"{j.name}: {j.why_missing(metric)}" for j in js if j.value(metric) is None]
        if transform and have:
            have = transform(have)
        if have:
            xs, ys = zip(*have)
            ax.plot(xs, ys, marker="o", label=f"{label} {g}".strip(), gid=f"{metric}|{g}")
    return missing


def _chars_per_line(ax, fontsize: float, share: float = 0.96) -> int:
    """How many characters of text at `fontsize` fit across `share` of the axes' width."""
    fig = ax.get_figure()
    width_pt = ax.get_position().width * fig.get_figwidth() * 72 * share
    return max(int(width_pt / (0.6 * fontsize)), 20)  # 0.6 em: a generous mean glyph width for DejaVu Sans


def reasons_text(reasons: dict[str, str], width: int) -> str:
    """'metric, metric: reason' per distinct reason, each reason once, wrapped at `width`
    characters on word boundaries (never cut)."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for metric, why in reasons.items():
        by_reason[why].append(metric)
    return "\n".join(textwrap.fill(f"{', '.join(ms)}: not measured ({why})", width, break_long_words=True)
                     for why, ms in by_reason.items())


def _not_measured(ax, metric: str, missing: list[str]) -> None:
    """An empty panel says which metric is missing and why (each distinct reason once)."""
    if not ax.lines:
        whys = list(dict.fromkeys(m.split(": ", 1)[-1] for m in missing)) or ["no job logged it"]
        width = _chars_per_line(ax, 8)
        text = "\n".join([metric, "not measured:"] + [textwrap.fill(w, width) for w in whys])
        ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=8, color="tab:red", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])


def _log2_axis(ax, values) -> None:
    """Log-2 x axis labelled with the swept values themselves (4, 40, 256, ...)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())


def _normalise_to_first(pts):
    base = pts[0][1]
    return [(x, y / base) for x, y in pts]


def actor_scaling(study: Study) -> Drawn:
    """The study's Figure 3: normalised runtime and power vs actors; perf/W and energy per task."""
    name, title = "fig3_actor_scaling", "Figure 3: scaling the actors"
    groups = series(study.finished, "actors", "actors")
    if len({j.actors for js in groups.values() for j in js}) < 2:
        return Drawn(name, title, None, "needs finished jobs at two or more actor counts")
    fig = Figure(figsize=(11, 8.5))
    axes = fig.subplots(2, 2)
    panels = [
        (axes[0, 0], [("runtime_s", "", _normalise_to_first)], "runtime / runtime at fewest actors"),
        (axes[0, 1], [("power_gpu_w_avg", "GPU", None), ("power_cpu_w_avg", "CPU pkg", None)], "average power (W)"),
        (axes[1, 0], [("perf_per_watt", "", None)], f"perf per watt ({_fps_units(study)} / W)"),
        (axes[1, 1], [("energy_per_task_j", "total", None), ("energy_gpu_j", "GPU", None),
                      ("energy_cpu_j", "CPU pkg", None)], "energy per task (J)"),
    ]
    n_jobs = sum(len(js) for js in groups.values())
    for ax, metrics, ylabel in panels:
        missing, absent = [], {}
        for metric, label, transform in metrics:
            lost = _plot_metric(ax, groups, "actors", metric, label, transform)
            missing += lost
            if len(lost) == n_jobs:
                absent[metric] = lost[0].split(": ", 1)[-1]
        ax.set(xlabel="actors (environment instances)", ylabel=ylabel)
        if ax.lines:
            _log2_axis(ax, [j.actors for js in groups.values() for j in js])
            ax.legend(fontsize=7)
            if absent:  # a series of this panel that no job measured: say so, never draw it as zero
                ax.text(0.02, 0.02, reasons_text(absent, _chars_per_line(ax, 6)), fontsize=6, color="tab:red",
                        transform=ax.transAxes, va="bottom")
        _not_measured(ax, " / ".join(m for m, _, _ in metrics), missing)
        ax.grid(alpha=0.3)
    sub = f"{title} ({study.title}); baseline: each series' fewest actors; task = same frames and updates"
    return _finish(Drawn(name, title, fig), study, sub, bottom=0.06, top=0.97)


def sm_scaling(study: Study) -> Drawn:
    """The study's Figure 4: slowdown vs granted compute units and vs CPU/GPU ratio, fixed actors."""
    name, title = "fig4_sm_scaling", "Figure 4: limiting the learner's and inference's compute units"
    groups = series(study.finished, "sm_granted", "sm_limit")
    if not any(len({j.knob("sm_granted") for j in js}) >= 2 for js in groups.values()):
        return Drawn(name, title, None, "needs finished jobs at two or more granted unit counts at fixed actors")
    unit = f"{study.compute_unit}s"
    fig = Figure(figsize=(11, 4.8))
    axes = fig.subplots(1, 2)
    for ax, x_key, xlabel in ((axes[0], "sm_granted", f"granted {unit}"), (axes[1], "cpu_gpu_ratio",
                                                                            "CPU/GPU ratio (actor threads / units)")):
        for g, js in groups.items():
            base = max(js, key=lambda j: j.knob("sm_granted"))
            pts = sorted((j.knob(x_key), j.value("runtime_s") / base.value("runtime_s")) for j in js)
            ax.plot(*zip(*pts), marker="o", label=f"{g} (baseline {base.knob('sm_granted'):.0f} units)",
                    gid=f"slowdown_vs_{x_key}|{g}")
        ax.axhline(1.0, color="grey", lw=0.8)
        if x_key == "cpu_gpu_ratio":
            ax.axvline(1.0, color="tab:red", ls="--", lw=0.8, label="study's rule: ratio >= 1")
        _log2_axis(ax, [j.knob(x_key) for js in groups.values() for j in js])
        ax.set(xlabel=xlabel, ylabel="slowdown (runtime / runtime with most units)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title})", bottom=0.06, top=0.95)


def operations(study: Study) -> Drawn:
    """Time per operation, per job, as stacked bars (one panel per role)."""
    name, title = "operations", "Time per operation (share of each role's wall time)"
    jobs = [j for j in study.finished if any(k.startswith("op_frac/") for k in j.metrics)]
    if not jobs:
        return Drawn(name, title, None, "no job logged op_frac/<role>/<op> (telemetry off, or none finished)")
    roles = ("actors", "inference", "learner")
    fig = Figure(figsize=(15, 0.5 * len(jobs) + 3.5))
    axes = fig.subplots(1, 3, sharey=True)
    for ax, role in zip(axes, roles):
        logged = {k.split("/")[2] for j in jobs for k in j.metrics if k.startswith(f"op_frac/{role}/")}
        ops = [op for op in (*OPS.get(role, ()), OTHER) if op in logged] + sorted(logged - {*OPS.get(role, ()), OTHER})
        left = [0.0] * len(jobs)
        for op in ops:  # the contract's order, one colour per operation in every panel and figure
            widths = [j.value(f"op_frac/{role}/{op}") or 0.0 for j in jobs]  # an op a job never ran: no time
            bars = ax.barh([j.name for j in jobs], widths, left=left, label=op, color=op_colour(op))
            for patch in bars:
                patch.set_gid(f"op_frac/{role}/{op}")
            left = [a + b for a, b in zip(left, widths)]
        ax.set(title=role if ops else f"{role}: no operations logged", xlabel="share of wall time", xlim=(0, 1.05))
        if ops:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
    sub = f"{title} ({study.title}); corrected for annotation cost"
    return _finish(Drawn(name, title, fig), study, sub, bottom=0.05, top=0.95)


def gpu_busy(study: Study) -> Drawn:
    """GPU-busy fraction (CUDA events) beside NVML utilisation, per job."""
    name, title = "gpu_busy", "GPU busy (CUDA events) vs NVML utilisation"
    jobs = study.finished
    if not any(j.value("gpu_busy_frac") is not None or j.value("gpu_util_avg") is not None for j in jobs):
        reason = jobs[0].why_missing("gpu_busy_frac") if jobs else "no finished job"
        return Drawn(name, title, None, f"not measured: {reason}")
    fig = Figure(figsize=(max(6, 0.8 * len(jobs) + 2), 4.5))
    ax = fig.subplots()
    xs = range(len(jobs))
    for off, metric in ((-0.2, "gpu_busy_frac"), (0.2, "gpu_util_avg")):
        have = [(x + off, j.value(metric)) for x, j in zip(xs, jobs) if j.value(metric) is not None]
        if have:
            bars = ax.bar(*zip(*have), width=0.4, label=metric)
            for patch in bars:
                patch.set_gid(metric)
    ax.set_xticks(list(xs), [j.name for j in jobs], rotation=30, ha="right", fontsize=7)
    ax.set(ylabel="fraction of runtime", ylim=(0, 1.05))
    ax.legend()
    sub = f"{title} ({study.title}); NVML counts any kernel running"
    return _finish(Drawn(name, title, fig), study, sub, bottom=0.08, top=0.95)


def pareto_front(study: Study) -> Drawn:
    """A search's trials: fps vs energy per task, the non-dominated ones joined."""
    name, title = "pareto_front", "Search: fps vs energy per task"
    jobs = [j for j in study.finished if j.value("fps") is not None and j.value("energy_per_task_j") is not None]
    if not jobs:
        reason = study.finished[0].why_missing("energy_per_task_j") if study.finished else "no finished trial"
        return Drawn(name, title, None, f"energy per task not measured: {reason}")
    pts = [(j.value("fps"), j.value("energy_per_task_j")) for j in jobs]
    front = sorted(pareto(pts), key=lambda i: pts[i][0])
    fig = Figure(figsize=(7, 5))
    ax = fig.subplots()
    ax.scatter(*zip(*pts), color="tab:grey", label="trials", gid="trials")
    ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "o-", color="tab:red", label="Pareto front",
            gid="pareto")
    for j, (f, e) in zip(jobs, pts):
        ax.annotate(f"{j.name} (ratio {j.knob('cpu_gpu_ratio') or float('nan'):.2g})", (f, e), fontsize=6)
    ax.set(xlabel=f"fps ({_fps_units(study)}), higher is better", ylabel="energy per task (J), lower is better")
    ax.legend()
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title})", bottom=0.08, top=0.95)


ONOFF_NOTE = ("RL-Scope measured single-process TF/PyTorch implementations (PPO2, A2C vs DDPG, SAC, TD3) with "
              "simulation in the training loop; here both run SEED RL's central-inference pipeline, the actors "
              "stepping beside the learner, on the same env, actors and task frames.")


def on_off_policy(study: Study) -> Drawn:
    """Per algorithm: its share of the task in env stepping and in the learner (RL-Scope's
    on- vs off-policy comparison), with the ratio of simulation-boundness."""
    from rlbench.report.findings import algorithm_shares
    from rlbench.report.verdict import on_off_policy as compare

    name, title = "onoff_policy", "On- vs off-policy: where the task's time goes"
    shares = algorithm_shares(study)
    found = compare(shares)
    if found is None:
        return Drawn(name, title, None, "needs finished jobs of an on-policy (vtrace) and an off-policy algorithm "
                                        f"with sim_share; this study has: {sorted(shares) or 'none'}")
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    algos = [found.on, found.off]
    for off, (metric, values) in ((-0.2, ("sim_share", found.sim_share)), (0.2, ("learner_share", found.learner_share))):
        have = [(i + off, values[a]) for i, a in enumerate(algos) if values.get(a) is not None]
        bars = ax.bar(*zip(*have), width=0.4, label=metric, color="tab:green" if metric == "sim_share" else "tab:purple")
        for patch in bars:
            patch.set_gid(metric)
    ax.set_xticks(range(len(algos)), [f"{found.on} (on-policy)", f"{found.off} (off-policy)"])
    ratio = "n/a" if found.ratio is None else f"{found.ratio:.2f}x"
    ax.set(ylabel="share of the task's runtime", ylim=(0, 1.05),
           title=f"simulation-boundness {found.on} / {found.off}: {ratio} (RL-Scope: >= 3.5x)")
    ax.legend()
    fig.text(0.01, 0.06, "\n".join(textwrap.wrap(ONOFF_NOTE, 120)), fontsize=7, va="bottom")
    return _finish(Drawn(name, title, fig), study, f"{title} ({study.title})", bottom=0.2, top=1.0)


def all_figures(study: Study) -> list[Drawn]:
    figs = [actor_scaling(study), sm_scaling(study), operations(study), gpu_busy(study), on_off_policy(study)]
    if study.kind == "study":
        figs.append(pareto_front(study))
    return figs
