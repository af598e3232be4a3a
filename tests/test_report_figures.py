"""Report figures a reader can read: reasons wrap and are never cut, one colour per operation."""

import mlflow
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox

from rlbench.report import figures as F
from rlbench.report import load_parent
from rlbench.telemetry.charts.colours import op_colour
from rlbench.tracking.unmeasured import format_unmeasured

LONG_GPU = (
    "nvmlInit failed: library_not_found (NVML Shared Library Not Found); the learner and inference ran on a "
    "host without any NVIDIA driver, so neither board power nor the total-energy counter exists here; "
    "no GPU samples were taken over the whole task of this job, from the first reset to the last update"
)
LONG_CPU = (
    "no powercap directory at /sys/class/powercap (no RAPL: not Linux, a VM, or no intel_rapl driver); "
    "no RAPL readings and no cpu_tdp_w configured for an estimate of the package energy"
)
OPS = {
    "op_frac/actors/env_step": 0.3,
    "op_frac/actors/inference": 0.6,
    "op_frac/actors/other": 0.1,
    "op_frac/inference/forward": 0.7,
    "op_frac/inference/other": 0.3,
    "op_frac/learner/wait": 0.4,
    "op_frac/learner/forward_backward": 0.5,
    "op_frac/learner/other": 0.1,
}


def _sweep(store):
    """Three finished jobs at 2, 4, 8 actors without any energy, with long reasons."""
    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    exp = client.create_experiment("figs", artifact_location=str(store["db"].parent / "artifacts"))
    parent = client.create_run(exp, run_name="sweep", tags={"rlbench.role": "sweep"}).info.run_id
    reasons = {
        "energy_gpu_j": LONG_GPU,
        "power_gpu_w_avg": LONG_GPU,
        "energy_cpu_j": LONG_CPU,
        "power_cpu_w_avg": LONG_CPU,
        "energy_per_task_j": "no measured power (GPU and CPU above)",
        "perf_per_watt": "no measured power (GPU and CPU above)",
    }
    for actors in (2, 4, 8):
        run = client.create_run(
            exp,
            run_name=f"actors={actors}",
            tags={"mlflow.parentRunId": parent, "unmeasured": format_unmeasured(reasons)},
        )
        client.log_param(run.info.run_id, "actors", actors)
        for k, v in {"fps": 100.0 * actors, "runtime_s": 10.0 / actors, "frames": 1000.0, **OPS}.items():
            client.log_metric(run.info.run_id, k, v)
        client.set_terminated(run.info.run_id, "FINISHED")
    client.set_terminated(parent, "FINISHED")
    return load_parent(parent)


def _texts_inside(fig) -> list[str]:
    """The texts of `fig` that reach outside it once drawn (should be none)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    page = Bbox.from_bounds(0, 0, fig.bbox.width, fig.bbox.height).expanded(1.001, 1.001)
    texts = [t for t in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_text()) if t.get_visible()]
    return [
        t.get_text()[:60]
        for t in texts
        if not page.contains(*t.get_window_extent(renderer).p0) or not page.contains(*t.get_window_extent(renderer).p1)
    ]


def test_not_measured_reasons_are_said_once_whole_at_the_foot(store):
    drawn = F.actor_scaling(_sweep(store))
    flat = " ".join(" ".join(t.get_text() for t in drawn.fig.texts).split())
    assert flat.count(" ".join(LONG_GPU.split())) == 1 and flat.count(" ".join(LONG_CPU.split())) == 1
    assert not any(ax.get_ylabel() == "average power (W)" for ax in drawn.fig.axes)  # no empty panel
    assert _texts_inside(drawn.fig) == []


def test_never_measured_names_the_sources_of_a_derived_value_and_groups_shared_reasons():
    from rlbench.report.never_measured import never_measured, one_line
    from rlbench.tracking.study_records import JobRun

    nulls = {"perf_per_watt": "no measured power", "energy_gpu_j": "no NVML", "energy_cpu_j": "no RAPL"}
    jobs = [JobRun(f"r{i}", f"j{i}", "FINISHED", {}, {"fps": 1.0}, nulls) for i in range(2)]
    found = never_measured(jobs, ["fps", "perf_per_watt", "gpu_util_avg"])
    assert found == {
        "perf_per_watt": "no measured power",
        "gpu_util_avg": "not logged",
        "energy_cpu_j": "no RAPL",
        "energy_gpu_j": "no NVML",
    }
    assert (
        one_line({"a": "why one", "b": "why one", "c": "why two"})
        == "Not measured in any job: a, b (why one); c (why two)"
    )
    assert one_line({}) == "" and never_measured([], ["fps"]) == {}


def test_operations_use_one_colour_per_operation_in_every_panel(store):
    drawn = F.operations(_sweep(store))
    seen = {}
    for ax in drawn.fig.axes:
        for patch in ax.patches:
            op = (patch.get_gid() or "").rsplit("/", 1)[-1]
            seen.setdefault(op, set()).add(patch.get_facecolor()[:3])
    assert {"env_step", "forward", "wait", "other"} <= set(seen)
    from matplotlib.colors import to_rgb

    assert all(colours == {to_rgb(op_colour(op))} for op, colours in seen.items()), seen


def test_the_operations_legend_reads_at_least_10_px_at_the_reports_width(store):
    drawn = F.operations(_sweep(store))
    (legend,) = drawn.fig.legends
    shown_px = 984  # a 1000 px window less the page's padding: the image is scaled to it
    for text in legend.get_texts():
        px = text.get_fontsize() / 72 * drawn.fig.dpi * shown_px / (drawn.fig.get_figwidth() * drawn.fig.dpi)
        assert px >= 10, (text.get_text(), px)
    assert _texts_inside(drawn.fig) == []


def test_figure3_draws_each_configurations_median_with_its_range_normalised_to_the_fewest_actors_median():
    """With repeats, one point per configuration: the median through its runs and a min..max
    bar, normalised to the fewest actors' median (not to the first run, and no zig-zag)."""
    from rlbench.tracking.study_records import JobRun, Study

    runtimes = {4: [10.0, 12.0, 11.0], 16: [13.0, 8.0, 9.0], 64: [6.0, 6.0]}
    jobs = [
        JobRun(
            f"r{a}-{i}",
            f"actors={a}",
            "FINISHED",
            {"actors": str(a)},
            {"runtime_s": t, "fps": 1000.0 / t, "frames": 1000.0},
            {},
        )
        for a, ts in runtimes.items()
        for i, t in enumerate(ts)
    ]
    drawn = F.actor_scaling(Study("sweep", "s", "p", {}, jobs, []))
    (ax,) = [ax for ax in drawn.fig.axes if ax.get_ylabel().startswith("runtime")]
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "runtime_s|all jobs"]
    assert list(line.get_xdata()) == [4, 16, 64]
    assert list(line.get_ydata()) == [1.0, 9.0 / 11.0, 6.0 / 11.0]  # medians over the median at 4 actors
    (bars,) = [c for c in ax.collections if c.get_gid() == "runtime_s|all jobs|range"]
    spans = [sorted(round(y, 6) for _, y in seg) for seg in bars.get_segments()]
    assert spans == [
        [round(10 / 11, 6), round(12 / 11, 6)],
        [round(8 / 11, 6), round(13 / 11, 6)],
        [round(6 / 11, 6), round(6 / 11, 6)],
    ]


def test_figure3_draws_the_gpu_idle_power_a_stage_measured_across_its_power_panel():
    """A sweep with sweep.idle_power_s logs the GPU's idle power before its first job (rlbench/sweeps/warm.py, run
    `idle power`); Figure 3's power panel draws it as a line, and only where it was measured."""
    from rlbench.tracking.study_records import JobRun, Study, idle_power_of

    jobs = [
        JobRun(
            f"r{a}",
            f"actors={a}",
            "FINISHED",
            {"actors": str(a)},
            {"runtime_s": 10.0 / a, "fps": 100.0 * a, "frames": 1000.0, "power_gpu_w_avg": 120.0 + a},
            {},
        )
        for a in (4, 40, 128)
    ]

    class Run:
        def __init__(self, tags, metrics):
            self.tags, self.metrics = tags, metrics

    idle = idle_power_of(
        [Run({"rlbench.role": "idle_power"}, {"idle_power_gpu_w": 80.1}), Run({}, {"idle_power_gpu_w": 999.0})]
    )  # only the idle-power runs count
    assert idle == 80.1
    for watts, lines in ((idle, [80.1]), (None, [])):
        drawn = F.actor_scaling(Study("experiment", "e", None, {}, jobs, [], idle_power_w=watts))
        (ax,) = [ax for ax in drawn.fig.axes if ax.get_ylabel() == F.POWER_PANEL]
        assert [ln.get_ydata()[0] for ln in ax.lines if ln.get_gid() == "idle_power_gpu_w"] == lines


def _foot(drawn) -> str:
    """A drawn figure's texts (its title and its foot), unwrapped."""
    return " ".join(" ".join(t.get_text() for t in drawn.fig.texts).split())


def test_a_figure_that_draws_whiskers_says_at_its_foot_what_its_points_and_whiskers_are():
    """Where repeats differ the figure draws a min..max whisker through each median, and its foot
    says what points and whiskers are; the same figure of single runs draws none and says nothing."""
    from rlbench.core.metrics import NODE_FPS
    from rlbench.report.packing import RANGES as PACK_RANGES
    from rlbench.report.packing import packing
    from rlbench.tracking.study_records import JobRun, PackRun, Study

    def study(runtimes: dict[int, list[float]], packs=()) -> Study:
        jobs = [
            JobRun(f"r{a}-{i}", f"actors={a}", "FINISHED", {"actors": str(a)}, {"runtime_s": t, "fps": 1e3 / t}, {})
            for a, ts in runtimes.items()
            for i, t in enumerate(ts)
        ]
        return Study("sweep", "s", "p", {}, jobs, [], packs=list(packs))

    line = " ".join(F.RANGES.split())
    repeated = F.actor_scaling(study({4: [10.0, 12.0], 16: [8.0, 9.0]}))
    assert F.draws_ranges(repeated.fig) and line in _foot(repeated)
    single = F.actor_scaling(study({4: [10.0], 16: [8.0]}))
    assert not F.draws_ranges(single.fig) and "whiskers" not in _foot(single)
    packs = [PackRun(k, "c", r, {NODE_FPS: 100.0 * k + r}, {}) for k in (1, 2) for r in (0, 1)]
    packed = packing(study({4: [10.0]}, packs))
    assert " ".join(PACK_RANGES.split()) in _foot(packed) and line not in _foot(packed)
    assert _texts_inside(repeated.fig) == [] and _texts_inside(packed.fig) == []
