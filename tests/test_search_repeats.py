"""The search measured as sweeps are (issue 52, point 5): search.repeats runs each trial's
configuration with the repeats' seeds, its value the median of its runs; the recommendation is
the set the verdict rule (core/verdict.py) does not tell apart, with the knobs as they ran."""

from __future__ import annotations

import pytest
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from rlbench.config.schema import TrackingConfig
from rlbench.core.verdict import NO_GPU_RATIO
from rlbench.prepare.grid import repeat_seeds
from rlbench.searches.run import run_study
from rlbench.searches.space import granted_space
from rlbench.searches.trials import repeat_overrides
from rlbench.tracking.study_records import JobRun, Study, without_gpu
from tests.conftest import plain_table, runs
from tests.test_search_logic import JOB, URI, Launcher, Lock, knob, new_study, space
from tests.tracking_fake import FakeExperiment, FakeParent

RUNTIMES = {2: [10.0, 10.5, 11.0], 4: [10.2, 10.8, 10.4], 8: [20.0, 20.5, 21.0]}  # per actor count, per repeat


def timed(overrides):
    """runtime_s by actors and repeat (its seed); the job gets one actor thread, whatever was asked."""
    seeds = repeat_seeds(3, 1)
    runtime = RUNTIMES[knob(overrides, "actors")][seeds.index(str(knob(overrides, "seed")))]
    return JobReturn(
        status=JobStatus.COMPLETED,
        _return_value={
            "runtime_s": runtime,
            "fps": 1000 / runtime,
            "cpu_gpu_ratio": 1 / knob(overrides, "sm_limit"),
            "run_id": f"run-{knob(overrides, 'actors')}-{knob(overrides, 'seed')}",
            "actor_threads_used": 1,
            "sm_granted": knob(overrides, "sm_limit"),
            "compute_unit": "sm",
        },
    )


def searched(outcome=timed, actors=(2, 4, 8), repeats=3, store=None, **kw):
    """A study of one trial per actor count (enqueued, each asking 2 actor threads), run with the
    fakes (store: the FakeExperiment to record into)."""
    kw = {"objectives": ["runtime_s"], "directions": ["minimize"]} | kw
    s = space(n_trials=len(actors), actors=[2, 8], actor_threads=[1, 2], repeats=repeats, **kw)
    study, launcher = new_study(s), Launcher(outcome)
    for a in actors:
        study.enqueue_trial({"actors": a, "actor_threads": 2, "sm_limit": 2})
    experiment = (store or FakeExperiment()).open(TrackingConfig(uri=URI, experiment="test"))
    parent = FakeParent(name="study ratio")
    run_study(launcher, study, s, JOB, experiment, parent, Lock(), seeds=repeat_seeds(repeats, 1))
    return study, parent, launcher


def test_each_trial_runs_its_repeats_with_their_seeds_and_its_value_is_their_median():
    study, _, launcher = searched()
    assert [knob(o, "seed") for o in launcher.launched] == [1, 10_001, 20_001] * 3
    assert [t.values for t in study.trials] == [[10.5], [10.4], [20.5]]
    assert [len(t.user_attrs["runs"]) for t in study.trials] == [3, 3, 3]


def test_the_recommendation_is_the_set_not_told_apart_with_the_knobs_as_they_ran(capsys):
    experiment = FakeExperiment()
    _, parent, _ = searched(store=experiment)
    tags, note, said = parent.tags(), plain_table(parent.note), capsys.readouterr().out
    # noise floor: the largest ratio between two runs of one trial, 11.0 / 10.0 - 1 = 10%; actors=4
    # (median 10.4) and actors=2 (10.5) are 1.0% apart: not told apart; actors=8 (20.5) is told apart
    assert tags["best_actors"] == "4" and tags["best_actor_threads_used"] == "1" and tags["best_sm_granted"] == "2"
    # each trial by the command line's names, as it ran (to paste into a command), then what was asked
    trial = "trial {}: actors={} actor_threads=1 sm_limit=2 (asked actor_threads=2)"
    assert tags["best_set"] == f"{trial.format(1, 4)}; {trial.format(0, 2)}"
    assert (
        "\n\nrecommended: `actors=4 actor_threads=1 sm_limit=2` -> cpu_gpu_ratio=0.5 "
        "(runtime_s=10.4; median of 3 runs; trial 1; asked actor_threads=2)\n\n"
        f"not told apart from it (noise floor 10.0%): `{trial.format(0, 2)}`\n\n"
        f"- {trial.format(1, 4)} is 1.0% faster than {trial.format(0, 2)}; noise floor 10.0%: not told apart\n\n"
        "verdict: Best by median runtime_s"
    ) in note
    assert "```" not in note  # lines that wrap (MLflow cuts a code block at its right edge)
    assert (  # the terminal's text, plain
        "\nrecommended: actors=4 actor_threads=1 sm_limit=2 -> cpu_gpu_ratio=0.5 "
        "(runtime_s=10.4; median of 3 runs; trial 1; asked actor_threads=2)\n"
        f"not told apart from it (noise floor 10.0%): {trial.format(0, 2)}\n  {trial.format(1, 4)} is 1.0% faster"
    ) in said
    # every run of a trial carries its trial's verdict, as a sweep's repeats carry their configuration's
    assert {run: t["verdict"] for run, t in experiment.run_tags.items()} == {
        f"run-{a}-{seed}": v
        for a, v in (
            (2, "not told apart from best: 1.0% slower; noise floor 10.0%"),
            (4, "best; noise floor 10.0%"),
            (8, "slower than best: 97.1% slower; noise floor 10.0%"),
        )
        for seed in repeat_seeds(3, 1)
    }
    assert tags["verdict"] == (
        f"Best by median runtime_s: {trial.format(1, 4)}; not told "
        f"apart from {trial.format(0, 2)} (1.0% slower): noise floor 10.0%"
    )
    # the trials table: per trial its runs' median and range, and cpu_gpu_ratio
    head = next(line for line in note.splitlines() if line.startswith("| job "))
    assert head == "| job | runtime_s | task_fps | fps | energy_per_task_j | cpu_gpu_ratio | bound |"
    assert any(
        line.startswith(f"| `{trial.format(2, 8)}` [1](") and "| 20.5 (20..21, n=3) |" in line
        for line in note.splitlines()
    ), note


def test_a_seed_the_job_names_is_replaced_by_the_repeats_seeds():
    assert repeat_overrides(["env=cartpole", "seed=5", "actors=2"], ["5", "10005"]) == [
        ["env=cartpole", "actors=2", "seed=5"],
        ["env=cartpole", "actors=2", "seed=10005"],
    ]
    assert repeat_overrides(["seed=5"], None) == [["seed=5"]] and repeat_overrides(["a=1"], ["1"]) == [["a=1"]]


def test_without_a_gpu_the_search_compares_no_ratio_as_the_report_does():
    def cpu(overrides):
        ret = timed(overrides)
        ret.return_value["compute_unit"] = "cpu_thread"
        return ret

    _, parent, _ = searched(cpu, actors=(2,))
    assert NO_GPU_RATIO in parent.note and "-> cpu_gpu_ratio" not in parent.note
    assert parent.tags()["best_cpu_gpu_ratio"] == "not compared (no GPU)"
    assert "| cpu_gpu_ratio (no GPU: not compared) | bound |" in plain_table(parent.note)
    # one rule: the report's Study.without_gpu is this function over its finished jobs' tags
    jobs = [JobRun("r", "j", "FINISHED", {}, {}, {}, {"compute_unit": u}) for u in ("cpu_thread", "sm")]
    assert Study("sweep", "t", None, {}, jobs[:1], []).without_gpu and without_gpu(["cpu_thread"])
    assert not Study("sweep", "t", None, {}, jobs, []).without_gpu and not without_gpu(["cpu_thread", "sm"])
    assert not without_gpu([])


def test_two_objectives_link_the_pareto_front():
    def both(overrides):
        ret = timed(overrides)
        ret.return_value["energy_per_task_j"] = 50.0 * knob(overrides, "actors")
        return ret

    _, parent, _ = searched(
        both, actors=(2, 8), objectives=["runtime_s", "energy_per_task_j"], directions=["minimize", "minimize"]
    )
    links = plain_table(parent.note).splitlines()[0]  # on the first line, with what ran
    assert "[Pareto front](" in links and "pareto_front.png" in links and "Optimisation history" not in links


def test_the_space_proposes_only_the_threads_the_env_family_grants():
    conf = OmegaConf.create({"env": {"kind": "gym"}})
    s = space(actor_threads=[1, 2])
    assert granted_space(s, conf, cpus=2) == (
        "search.actor_threads=[1, 2] searched as [1, 1]: what a gym job is "
        "granted on this host (its actor_threads_used)"
    )
    assert list(s.actor_threads) == [1, 1]
    atari = space(actor_threads=[1, 2])
    assert granted_space(atari, OmegaConf.create({"env": {"kind": "atari"}}), cpus=2) is None
    assert list(atari.actor_threads) == [1, 2]


@pytest.mark.parametrize("value, shown", [("0", "0"), ("-1", "-1")])
def test_search_repeats_below_one_is_refused_before_any_work(store, tmp_path, rlbench_main, value, shown):
    out = rlbench_main(
        [
            "-m",
            "search=ratio",
            f"search.repeats={value}",
            f"search.storage=sqlite:///{tmp_path}/optuna.db",
            "env=cartpole",
            "workload=smoke",
            *store["overrides"],
        ]
    )
    assert out.returncode == 2, out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    assert lines == [
        (
            f"rlbench: no job started: search.repeats={shown}: allowed: an integer >= 1 (runs of each "
            "trial's configuration)"
        )
    ], out.stderr
    assert not (tmp_path / "optuna.db").exists() and runs(store["uri"]) == []
