"""Issue 27's report: fps and runtime_s vs actor hosts (or processes) with the learner's rate as
the ceiling, and the verdict line naming how many actor hosts saturate one learner."""

from rlbench.report import figures as F
from rlbench.report.findings import findings, verdict_lines
from rlbench.report.rules import actor_saturation, learner_ceiling_fps
from rlbench.tracking.study_records import JobRun, Study

OPS = {"op_frac/actors/env_step": 0.2, "op_frac/actors/inference": 0.7, "op_frac/actors/other": 0.1}
# actor hosts -> (fps, runtime_s, learner_share): more hosts help until 4, then the learner holds the task
RUNS = {
    1: (1000.0, 400.0, 0.25),
    2: (2000.0, 200.0, 0.5),
    4: (3600.0, 111.0, 0.9),
    8: (3800.0, 105.0, 0.95),
    16: (3850.0, 104.0, 0.96),
}


def _study(axis="actor_hosts") -> Study:
    jobs = [
        JobRun(
            f"r{h}",
            f"{axis}={h}",
            "FINISHED",
            {axis: str(h), "actors": "64", "env.frameskip": "4"},
            {"fps": fps, "runtime_s": rt, "frames": 400_000.0, "learner_share": share, **OPS},
            {},
        )
        for h, (fps, rt, share) in RUNS.items()
    ]
    return Study("sweep", "scale-out", "p", {"host": "h"}, jobs, [])


def test_the_figure_draws_the_measured_fps_and_runtime_and_the_learners_rate_as_the_ceiling():
    drawn = F.actor_hosts_scaling(_study())
    lines = {ln.get_gid(): (list(ln.get_xdata()), list(ln.get_ydata())) for ax in drawn.fig.axes for ln in ax.lines}
    assert lines["fps|all jobs"] == (list(RUNS), [r[0] for r in RUNS.values()])
    assert lines["runtime_s|all jobs"] == (list(RUNS), [r[1] for r in RUNS.values()])
    ceiling = [400_000.0 / (share * rt) for _, rt, share in RUNS.values()]
    assert lines["learner_ceiling|fps"] == (list(RUNS), ceiling)
    assert lines["learner_ceiling|runtime_s"][1] == [share * rt for _, rt, share in RUNS.values()]
    assert drawn.fig.axes[0].get_xlabel() == "actor hosts"
    procs = F.actor_hosts_scaling(_study("actor_procs"))
    assert procs.fig.axes[0].get_xlabel() == "actor procs"
    flat = Study("sweep", "s", "p", {}, [j for j in _study().jobs if j.params["actor_hosts"] == "4"], [])
    assert F.actor_hosts_scaling(flat).fig is None and "two or more" in F.actor_hosts_scaling(flat).note


def test_the_verdict_names_how_many_hosts_saturate_one_learner_and_what_then_bounds_it():
    lines = [ln for ln in verdict_lines(findings(_study())) if ln.startswith("scale-out:")]
    assert len(lines) == 1 and lines[0].startswith("scale-out: actor hosts: 4 saturate one learner")
    # at 4 hosts the actors stepped 111 s x 3600 fps ~ all 400k frames: no learner tail, so rlbench.core.bound
    # names the actors' largest share, inference; the learner's rate 400k / (0.9 x 111 s) beside it
    assert "bound by inference" in lines[0] and f"the learner's rate {400_000 / (0.9 * 111):.0f} frames/s" in lines[0]
    still = actor_saturation({1: {"runtime_s": 100.0, "fps": 1.0}, 2: {"runtime_s": 50.0, "fps": 2.0}}, "actor_hosts")
    assert still.count == 2 and not still.reached and "beyond 2 were not measured" in still.text
    assert learner_ceiling_fps({"frames": 100.0, "runtime_s": 10.0}) is None  # no learner_share: not a zero
