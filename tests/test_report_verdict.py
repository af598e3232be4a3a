"""The verdict's rules (rlbench/core/verdict.py: knee, recommend, study_rule; rlbench/report/rules.py:
pareto, on_off_policy) against synthetic numbers with a known answer."""

import pytest

from rlbench.core.bound import bottleneck
from rlbench.core.verdict import knee, recommend, study_rule
from rlbench.report.rules import pareto


def test_knee_is_where_more_actors_stop_shortening_the_task():
    # The study's shape: 4 -> 40 actors cut the task 5.5x, 256 only 5% more.
    k = knee({4: 600.0, 40: 110.0, 256: 104.0}, share=0.10, fps={4: 1000.0, 40: 5800.0, 256: 6000.0})
    assert (k.actors, k.reached) == (40, True) and k.gain_after == pytest.approx(1 - 104 / 110)
    assert "at 256 actors: actors' fps +3.4%, task -5.5%" in k.text


def test_knee_looks_past_a_dip():
    # 64 is slower than 40 but 256 is not 10% faster than 40 either: the knee is 40.
    assert knee({4: 600.0, 40: 200.0, 64: 210.0, 256: 190.0}, share=0.10).actors == 40
    # ...while a big saving after the dip moves it on.
    assert knee({4: 600.0, 40: 200.0, 64: 210.0, 256: 150.0}, share=0.10).actors == 256


def test_no_knee_inside_the_sweep_says_so():
    k = knee({4: 600.0, 8: 316.0, 16: 200.0}, share=0.10)
    assert not k.reached and "no knee" in k.text and "task -36.7%" in k.text


def test_the_knee_judges_the_task_and_says_when_the_learner_bounds_it():
    # the actors' fps grew 46.6% from 2 to 4 actors, the task only 2.7% shorter: the learner bounds it
    k = knee({2: 37.45, 4: 36.44}, share=0.10, fps={2: 1000.0, 4: 1466.0})
    assert k.actors == 2 and k.reached
    assert "actors' fps +46.6%, task -2.7%: the learner bounds the task, not the actors" in k.text


def test_actors_and_task_speeding_up_alike_do_not_name_the_learner():
    # a real 2-job CartPole sweep: the task 47.2% shorter is 1.89x its rate, as the actors' +89.4%
    k = knee({2: 7.87, 4: 4.156}, share=0.10, fps={2: 2543.0, 4: 4815.0})
    assert "actors' fps +89.3%, task -47.2%" in k.text and "learner" not in k.text


def test_a_knee_where_more_actors_only_slow_the_task_says_so():
    k = knee({40: 72.8, 256: 86.1}, share=0.10, fps={40: 3393.0, 256: 3401.0})  # the main command on 2 cores
    assert k.actors == 40 and "no larger actor count shortens the task" in k.text
    # no claim about the learner; one run each: the spread is unknown, and the text says so
    assert k.text.endswith(
        "at 256 actors: actors' fps +0.2%, task +18.3%; noise floor unknown: one run per "
        "configuration; rerun with repeats=3 to tell"
    )


def test_knee_share_is_configurable():
    pts = {4: 600.0, 40: 110.0, 256: 104.0}
    assert knee(pts, share=0.02).actors == 256 and not knee(pts, share=0.02).reached
    assert knee({4: 100.0}, 0.1).actors is None


def _ops(env, inf, rate, other, **extra):
    return {
        "op_frac/actors/env_step": env,
        "op_frac/actors/inference": inf,
        "op_frac/actors/rate_limited": rate,
        "op_frac/actors/other": other,
        "op_frac/learner/wait": 0.5,
        **extra,
    }


@pytest.mark.parametrize(
    "ops, kind",
    [
        (_ops(0.7, 0.2, 0.05, 0.05), "environment stepping"),
        (_ops(0.2, 0.7, 0.05, 0.05), "inference"),
        (_ops(0.1, 0.2, 0.6, 0.1), "learner"),
        (_ops(0.1, 0.2, 0.1, 0.6), "waiting"),
    ],
)
def test_bound_from_the_actors_time(ops, kind):
    # Actors stepped the whole runtime: 1e6 frames at 1e4 fps in 100 s.
    b = bottleneck(ops | {"runtime_s": 100.0, "frames": 1e6, "fps": 1e4})
    assert b.kind == kind and b.share == max(ops[k] for k in ops if k.startswith("op_frac/actors/"))
    assert b.evidence["learner tail of runtime"] == pytest.approx(0.0)


def test_inference_blocked_on_a_full_unroll_queue_counts_as_the_learner():
    # SEED's coupling: 94% of the actors' time in the inference call, 46% of that blocked on the
    # queue (the main command's 40-actor job): 0.43 of their time waited on the learner, 0.51 inferred
    b = bottleneck(
        _ops(0.06, 0.94, 0.0, 0.0, **{"op_frac/inference/queue_full_wait": 0.462})
        | {"runtime_s": 100.0, "frames": 1e6, "fps": 1e4}
    )
    assert b.kind == "inference" and b.share == pytest.approx(0.94 * (1 - 0.462))
    b = bottleneck(
        _ops(0.06, 0.94, 0.0, 0.0, **{"op_frac/inference/queue_full_wait": 0.644})
        | {"runtime_s": 100.0, "frames": 1e6, "fps": 1e4}
    )
    assert b.kind == "learner" and b.share == pytest.approx(0.94 * 0.644) and "full unroll queue" in b.text


def test_learner_tail_bounds_the_task():
    # Actors done after 20 s of 100 s: the learner's updates set the runtime.
    b = bottleneck(
        _ops(0.8, 0.1, 0.05, 0.05) | {"runtime_s": 100.0, "frames": 2e5, "fps": 1e4, "learner_updates": 15.0}
    )
    assert b.kind == "learner" and b.share == pytest.approx(0.8) and "20.0 s of 100.0 s" in b.text


def test_the_learner_tail_is_runtime_less_actors_done_s():
    # 256 Pong envs: the first reset took 14 s, so the actors were done at 34 s, not frames / fps = 20 s
    m = _ops(0.8, 0.1, 0.05, 0.05) | {"runtime_s": 100.0, "frames": 2e5, "fps": 1e4, "learner_updates": 15.0}
    b = bottleneck(m | {"actors_done_s": 34.0})
    assert b.evidence["learner tail of runtime"] == pytest.approx(0.66) and "34.0 s of 100.0 s" in b.text
    assert bottleneck(m).evidence["learner tail of runtime"] == pytest.approx(0.8)  # older runs: frames / fps


def test_a_job_without_a_learner_has_no_learner_tail():
    # algo=random: the same timing, no updates: the actors' own shares decide (it said "learner busy nan%")
    m = {k: v for k, v in _ops(0.8, 0.1, 0.05, 0.05).items() if k != "op_frac/learner/wait"}
    b = bottleneck(m | {"runtime_s": 100.0, "frames": 2e5, "fps": 1e4, "learner_updates": 0.0})
    assert b.kind == "environment stepping" and "nan" not in b.text


def test_bound_unknown_without_breakdown():
    assert bottleneck({"fps": 10.0}).kind == "unknown"


def test_recommend_trades_a_little_time_for_energy():
    jobs = [
        {"name": "a", "ratio": 0.5, "runtime_s": 100.0, "fps": 1000.0, "energy_j": 900.0},
        {"name": "b", "ratio": 1.0, "runtime_s": 104.0, "fps": 970.0, "energy_j": 600.0},
        {"name": "c", "ratio": 2.0, "runtime_s": 125.0, "fps": 800.0, "energy_j": 400.0},
    ]
    rec = recommend(jobs, tolerance=0.05)
    assert rec.name == "b" and rec.ratio == 1.0 and rec.energy_j == 600.0 and "task in 104.0 s" in rec.text
    assert recommend(jobs, tolerance=0.0).name == "a"


def test_recommend_without_energy_takes_the_shortest_task_and_says_so():
    # b has the higher fps, but a finishes the task first (the learner tail decides).
    jobs = [
        {"name": "a", "ratio": 2.0, "runtime_s": 30.0, "fps": 900.0, "energy_j": None},
        {"name": "b", "ratio": 1.0, "runtime_s": 60.0, "fps": 1000.0, "energy_j": None},
    ]
    rec = recommend(jobs)
    assert rec.name == "a" and rec.energy_j is None and "not measured" in rec.text
    assert recommend([]) is None


def test_recommend_names_what_differs_when_every_job_has_the_same_ratio():
    jobs = [
        {"name": "algo=r2d2", "ratio": 1.0, "runtime_s": 160.0, "fps": 6000.0, "energy_j": None},
        {"name": "algo=vtrace", "ratio": 1.0, "runtime_s": 67.0, "fps": 3200.0, "energy_j": None},
    ]
    rec = recommend(jobs)
    assert rec.text.startswith("algo=vtrace: task in 67.0 s") and "CPU/GPU ratio 1 (" not in rec.text
    assert rec.text.endswith(
        "every job ran at CPU/GPU ratio 1, so this comparison picks no ratio; "
        "noise floor unknown: one run per configuration; rerun with repeats=3 to tell"
    )


def test_recommend_without_a_gpu_names_no_ratio():
    jobs = [
        {"name": "actors=8", "ratio": 1.0, "runtime_s": 30.0, "fps": 900.0, "energy_j": None},
        {"name": "actors=4", "ratio": 1.0, "runtime_s": 60.0, "fps": 500.0, "energy_j": None},
    ]
    rec = recommend(jobs, ratios=False)
    assert rec.text.startswith("actors=8: task in 30.0 s, 900 fps") and "CPU/GPU ratio" not in rec.text


def test_study_rule_on_a_dgx1_like_host():
    # 40 threads / 80 SMs: the rule says 40 SMs are enough; 40-SM job 6% slower (the study).
    text = study_rule(40, 80, "SM", [(0.5, 100.0), (1.0, 106.0), (20.0, 300.0)])
    assert "ratio 0.5 with every unit" in text and "40 SM(s) are enough" in text
    assert "took +6% longer than the fastest (consistent" in text
    assert "does not hold" in study_rule(40, 80, "SM", [(0.5, 100.0), (1.0, 150.0)])
    assert "no job ran at ratio >= 1" in study_rule(40, 80, "SM", [(0.5, 100.0)])
    assert "not evaluated" in study_rule(None, 80, "SM", [])
    assert "spread" not in text  # medians of repeats: said as measured
    assert study_rule(40, 80, "SM", [(0.5, 100.0), (1.0, 150.0)], single_run=True).endswith(
        "(the rule does not hold here); noise floor unknown: one run per configuration; rerun with repeats=3 to tell"
    )


def test_pareto_front():
    pts = [(100.0, 50.0), (90.0, 40.0), (80.0, 45.0), (100.0, 60.0)]
    assert pareto(pts) == [0, 1]


def test_on_off_policy_ratio_of_simulation_shares_beside_rl_scope():
    from rlbench.report.rules import on_off_policy

    shares = {"r2d2": [(0.10, 0.9), (0.20, 0.8), (0.12, 0.85)], "vtrace": [(0.60, 0.3), (0.70, 0.2)]}
    found = on_off_policy(shares)
    assert (found.on, found.off) == ("vtrace", "r2d2")
    assert found.sim_share == {"r2d2": pytest.approx(0.12), "vtrace": pytest.approx(0.65)}  # medians
    assert found.learner_share["r2d2"] == pytest.approx(0.85)
    assert found.ratio == pytest.approx(0.65 / 0.12)
    assert "5.42x as simulation-bound as r2d2 (RL-Scope's >= 3.5x holds here)" in found.text
    below = on_off_policy({"r2d2": [(0.3, None)], "vtrace": [(0.6, None)]})
    assert below.ratio == pytest.approx(2.0) and "below RL-Scope's >= 3.5x" in below.text
    assert "learner busy unknown vs unknown" in below.text
    assert on_off_policy({"r2d2": [(0.3, 0.5)]}) is None  # one kind only: nothing to compare


def test_one_bound_line_per_configuration_from_its_runs_median_shares_saying_when_they_disagree():
    from rlbench.report.findings import config_bounds, verdict_lines
    from rlbench.tracking.study_records import JobRun

    task = {"runtime_s": 100.0, "frames": 1e6, "fps": 1e4}
    runs = [
        ("a", _ops(0.2, 0.7, 0.05, 0.05)),
        ("a", _ops(0.3, 0.6, 0.05, 0.05)),
        ("a", _ops(0.1, 0.2, 0.6, 0.1)),
        ("b", _ops(0.7, 0.2, 0.05, 0.05)),
        ("b", _ops(0.6, 0.3, 0.05, 0.05)),
        ("c", _ops(0.1, 0.2, 0.1, 0.6)),
    ]
    jobs = [
        JobRun(f"r{i}", f"{c} #{i}", "FINISHED", {}, ops | task, {}, {"repeat_group": c})
        for i, (c, ops) in enumerate(runs)
    ]
    bounds = config_bounds(jobs)
    assert list(bounds) == ["a", "b", "c"]  # one per configuration, not per run
    assert bounds["a"]["kind"] == "inference" and bounds["a"]["share"] == pytest.approx(0.6)  # median inference share
    assert bounds["a"]["text"].endswith(
        "; median shares of its 3 runs; its runs disagree: inference in 2, learner in 1"
    )
    assert bounds["b"]["text"].endswith("; median shares of its 2 runs")  # they agree: nothing more to say
    assert bounds["c"]["kind"] == "waiting" and "median shares" not in bounds["c"]["text"]  # one run
    lines = verdict_lines(
        {
            "knee": {},
            "bottleneck": {},
            "bound_per_config": bounds,
            "recommendation": None,
            "study_rule": "rule",
            "not_finished": [],
            "missing": [],
        }
    )
    assert [ln.split(":")[0] for ln in lines if ln.startswith("bound")] == ["bound (a)", "bound (b)", "bound (c)"]
