"""The ratio search warm-started from a profile: candidates, their ranking, and a tiny real
search whose first trials are the enqueued predictions (and a resume that adds none)."""

import copy
import json
from types import SimpleNamespace

import mlflow
import optuna
import pytest

from rlbench.config.schema import SearchConfig
from rlbench.searches.space import suggest
from rlbench.searches.warm_start import candidates, enqueue, predict_candidates, ranked
from tests.conftest import CARTPOLE_TINY, main_in_process, runs
from tests.test_predict_jobs import prof
from tests.test_search import _search, _study


def test_candidates_cover_the_space_with_powers_of_two_and_the_ends():
    s = SimpleNamespace(actors=[3, 40], actor_threads=[1, 2], sm_limit=[1, 132])
    got = candidates(s)
    assert sorted({c["actors"] for c in got}) == [3, 4, 8, 16, 32, 40]
    assert sorted({c["sm_limit"] for c in got}) == [1, 20, 38, 57, 76, 95, 113, 132]  # 8 evenly spaced: 1 + 131 i / 7
    assert len(got) == 6 * 2 * 8


def _pred(fps, runtime, energy=None, actors=4):
    return SimpleNamespace(
        fps=fps, runtime_s=runtime, energy_per_task_j=energy, learner_updates_per_s=None, knobs={"actors": actors}
    )


def test_ranking_uses_the_predictable_objectives_and_names_the_others():
    a, b, c = _pred(100, 10.0, actors=1), _pred(200, 12.0, actors=2), _pred(150, 9.0, actors=3)
    best, unused = ranked([a, b, c], ["fps", "energy_per_task_j"], ["maximize", "minimize"], 1000)
    assert [p.knobs["actors"] for p in best] == [2, 3, 1] and unused == ["energy_per_task_j"]
    # fps and runtime_s: b (most fps) and c (least time) are the Pareto front, ordered by runtime; a is dominated by c
    best, _ = ranked([a, b, c], ["fps", "runtime_s"], ["maximize", "minimize"], 1000)
    assert [p.knobs["actors"] for p in best] == [3, 2, 1]
    best, unused = ranked([a, b, c], ["perf_per_watt"], ["maximize"], 1000)  # nothing predictable: runtime
    assert [p.knobs["actors"] for p in best] == [3, 1, 2] and unused == ["perf_per_watt"]


@pytest.fixture(scope="module")
def cartpole_compose():
    """compose(overrides) for the tiny CartPole job: one composed config, the knobs set per candidate."""
    from rlbench.cli.predict import compose

    base = compose([*CARTPOLE_TINY, "eval_envs=0", "learner=false"])

    def _compose(overrides: list[str]):
        conf = copy.deepcopy(base)
        for o in overrides:
            key, value = o.split("=", 1)
            if key in ("actors", "actor_threads", "sm_limit"):
                setattr(conf, key, int(value))
        return conf

    return _compose


def _space(**kw) -> SearchConfig:
    """Two objectives, one the model cannot predict (energy: no power in the synthetic profile)."""
    return SearchConfig(
        actors=[2, 8],
        actor_threads=[1, 2],
        sm_limit=[1, 2],
        warm_start_profile="p1",
        **({"objectives": ["fps", "energy_per_task_j"], "directions": ["maximize", "minimize"]} | kw),
    )


def test_candidates_are_predicted_with_their_own_params(cartpole_compose):
    from rlbench.predict.jobs import Machine

    pairs = predict_candidates(
        ["env=cartpole", "actors=40", "sm_limit=1"], _space(), Machine(prof(), prof()), cartpole_compose
    )
    assert [c for c, _ in pairs] == candidates(_space()) and len(pairs) == 3 * 2 * 2
    assert all(p.knobs["actors"] == c["actors"] and p.knobs["sm_limit"] == c["sm_limit"] for c, p in pairs)
    # a gym env is modelled stepping on one thread: actor_threads=2 predicts the same job as 1
    assert {p.knobs["actor_threads"] for _, p in pairs} == {1}


def test_enqueued_trials_are_distinct_numbered_and_asked_first_and_a_resumed_study_gets_none(cartpole_compose):
    from rlbench.predict.jobs import Machine

    s, m = _space(warm_start_trials=3), Machine(prof(), prof())
    study = optuna.create_study(directions=list(s.directions))
    rows, unused = enqueue(study, s, [], m, cartpole_compose, 3000)
    assert unused == ["energy_per_task_j"] and [r["trial"] for r in rows] == [0, 1, 2]
    params = [{k: r[k] for k in ("actors", "actor_threads", "sm_limit")} for r in rows]
    # fps ranks them (the synthetic profile: 4 actors fastest); actor_threads=2 adds nothing the model sees
    assert params == [{"actors": a, "actor_threads": 1, "sm_limit": 2} for a in (4, 8, 2)]
    assert rows[0]["predicted_fps"] > rows[1]["predicted_fps"] > rows[2]["predicted_fps"]
    assert all(r["predicted_bound"] and r["predicted_runtime_s"] > 0 for r in rows)
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.number for t in waiting] == [0, 1, 2] and all(t.user_attrs["warm_start"] for t in waiting)
    asked = [suggest(study.ask(), s) for _ in range(3)]  # the search's own suggest pops them in order
    assert asked == params
    assert enqueue(study, s, [], m, cartpole_compose, 3000) == ([], [])  # resumed: nothing again
    assert not study.get_trials(states=(optuna.trial.TrialState.WAITING,))


def test_a_profile_the_job_cannot_use_is_a_search_error(cartpole_compose):
    from rlbench.predict.curves import Profile
    from rlbench.predict.jobs import Machine
    from rlbench.searches.space import SearchError
    from tests.test_predict_jobs import ENV, INF, TAGS

    pong = prof(env_id="ALE/Pong-v5")
    with pytest.raises(SearchError, match="search.warm_start_profile=p1: .*allowed: a profile of env_id=CartPole-v1"):
        predict_candidates([], _space(), Machine(pong, pong), cartpole_compose)
    no_updates = Profile("p2", TAGS, ENV, INF, [])  # profiled with --updates 0, but the job learns

    def learning(overrides):
        conf = cartpole_compose(overrides)
        conf.learner, conf.workload.learner_updates = True, 10
        return conf

    with pytest.raises(SearchError, match="search.warm_start_profile=p1: .*no learner-update timing"):
        predict_candidates([], _space(), Machine(no_updates, no_updates), learning)


@pytest.mark.e2e
def test_a_search_starts_from_the_profiles_predicted_best_and_resumes_without_them(store, tmp_path):
    from rlbench.cli.profile import main as profile_main

    assert (
        profile_main(
            [
                "--threads",
                "1",
                "--envs",
                "2,8",
                "--batches",
                "2,8",
                "--units",
                "1,2",
                "--seconds",
                "0.2",
                "--repeats",
                "2",
                "--updates",
                "1",
                "--corun-envs",
                "4",
                "--tracking-uri",
                store["uri"],
                *CARTPOLE_TINY,
                "eval_envs=0",
            ]
        )
        == 0
    )
    mlflow.set_tracking_uri(store["uri"])
    (profile,) = [
        r.info.run_id for r in mlflow.search_runs(experiment_names=["rlbench-profiles"], output_format="list")
    ]
    out = _search(
        store,
        tmp_path,
        3,
        f"search.warm_start_profile={profile}",
        "search.warm_start_trials=2",
        command=main_in_process,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "warm start: 2 trial(s) enqueued from profile" in out.stdout
    study = _study(tmp_path)
    warm = [t for t in study.trials if t.user_attrs.get("warm_start")]
    assert [t.number for t in warm] == [0, 1] and all(t.state.name == "COMPLETE" for t in warm)
    (parent,) = [r for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") == "study"]
    assert parent.data.tags["warm_start_profile"] == profile
    assert "not predictable, left out of the ranking: energy_per_task_j" in parent.data.tags["warm_start_note"]
    assert parent.data.tags["warm_start_note"] in parent.data.tags["mlflow.note.content"]  # the description
    with open(mlflow.MlflowClient().download_artifacts(parent.info.run_id, "warm_start/predictions.json")) as f:
        table = json.load(f)
    rows = [dict(zip(table["columns"], r, strict=True)) for r in table["data"]]
    assert [dict(t.params) for t in warm] == [{k: r[k] for k in ("actors", "actor_threads", "sm_limit")} for r in rows]
    assert [r["trial"] for r in rows] == [0, 1] and all(r["predicted_fps"] > 0 and r["predicted_bound"] for r in rows)
    assert [t.user_attrs["predicted_fps"] for t in warm] == pytest.approx([r["predicted_fps"] for r in rows])
    out = _search(
        store,
        tmp_path,
        4,
        f"search.warm_start_profile={profile}",
        "search.warm_start_trials=2",
        command=main_in_process,
    )
    assert out.returncode == 0 and "warm start" not in out.stdout  # resumed: nothing enqueued again
    assert len([t for t in _study(tmp_path).trials if t.user_attrs.get("warm_start")]) == 2
    from rlbench.report import build_report, load_parent

    result = build_report(load_parent(parent.info.run_id), tmp_path / "report")  # where prediction and trials differ
    assert "predicted_vs_measured" in result["figures"]
    assert any(ln.startswith("model: prediction_error=") and "named on the parent run" in ln for ln in result["lines"])


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["search.warm_start_profile=" + "0" * 32], "search.warm_start_profile=" + "0" * 32 + ": --profile="),
        (
            ["search.warm_start_profile=x", "search.warm_start_trials=9"],
            "search.warm_start_trials=9: allowed: an integer [1, search.n_trials=3]",
        ),
    ],
)
def test_a_bad_warm_start_is_refused_before_any_trial(store, tmp_path, extra, says, rlbench_main):
    out = _search(store, tmp_path, 3, *extra, command=rlbench_main)
    assert out.returncode == 2 and says in out.stderr, out.stderr[-2000:]
    with pytest.raises(KeyError):
        optuna.load_study(study_name="ratio", storage=f"sqlite:///{tmp_path}/optuna.db")
