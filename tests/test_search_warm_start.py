"""The ratio search warm-started from a profile: candidates, their ranking, and a tiny real
search whose first trials are the enqueued predictions (and a resume that adds none)."""

import json
from types import SimpleNamespace

import mlflow
import optuna
import pytest

from rlbench.search.warm_start import candidates, ranked
from tests.conftest import CARTPOLE_TINY, runs
from tests.test_search import _search, _study


def test_candidates_cover_the_space_with_powers_of_two_and_the_ends():
    s = SimpleNamespace(actors=[3, 40], actor_threads=[1, 2], sm_limit=[1, 132])
    got = candidates(s)
    assert sorted({c["actors"] for c in got}) == [3, 4, 8, 16, 32, 40]
    assert sorted({c["sm_limit"] for c in got}) == [1, 20, 38, 57, 76, 95, 113, 132]  # 8 evenly spaced: 1 + 131 i / 7
    assert len(got) == 6 * 2 * 8


def _pred(fps, runtime, energy=None, actors=4):
    return SimpleNamespace(fps=fps, runtime_s=runtime, energy_per_task_j=energy, learner_updates_per_s=None,
                           knobs={"actors": actors})


def test_ranking_uses_the_predictable_objectives_and_names_the_others():
    a, b, c = _pred(100, 10.0, actors=1), _pred(200, 12.0, actors=2), _pred(150, 9.0, actors=3)
    best, unused = ranked([a, b, c], ["fps", "energy_per_task_j"], ["maximize", "minimize"], 1000)
    assert [p.knobs["actors"] for p in best] == [2, 3, 1] and unused == ["energy_per_task_j"]
    # fps and runtime_s: b (most fps) and c (least time) are the Pareto front, ordered by runtime; a is dominated by c
    best, _ = ranked([a, b, c], ["fps", "runtime_s"], ["maximize", "minimize"], 1000)
    assert [p.knobs["actors"] for p in best] == [3, 2, 1]
    best, unused = ranked([a, b, c], ["perf_per_watt"], ["maximize"], 1000)  # nothing predictable: runtime
    assert [p.knobs["actors"] for p in best] == [3, 1, 2] and unused == ["perf_per_watt"]


def test_a_search_starts_from_the_profiles_predicted_best_and_resumes_without_them(store, tmp_path):
    from rlbench.profile import main as profile_main

    assert profile_main(["--threads", "1", "--envs", "2,8", "--batches", "2,8", "--units", "1,2", "--seconds", "0.2",
                         "--repeats", "2", "--updates", "1", "--corun-envs", "4", "--tracking-uri", store["uri"],
                         *CARTPOLE_TINY, "eval_envs=0"]) == 0
    mlflow.set_tracking_uri(store["uri"])
    (profile,) = [r.info.run_id for r in mlflow.search_runs(experiment_names=["rlbench-profiles"], output_format="list")]
    out = _search(store, tmp_path, 3, f"search.warm_start_profile={profile}", "search.warm_start_trials=2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "warm start: 2 trial(s) enqueued from profile" in out.stdout
    study = _study(tmp_path)
    warm = [t for t in study.trials if t.user_attrs.get("warm_start")]
    assert [t.number for t in warm] == [0, 1] and all(t.state.name == "COMPLETE" for t in warm)
    (parent,) = [r for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") == "study"]
    assert parent.data.tags["warm_start_profile"] == profile
    assert "not predictable, left out of the ranking: energy_per_task_j" in parent.data.tags["warm_start_note"]
    with open(mlflow.MlflowClient().download_artifacts(parent.info.run_id, "warm_start/predictions.json")) as f:
        table = json.load(f)
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    assert [dict(t.params) for t in warm] == [{k: r[k] for k in ("actors", "actor_threads", "sm_limit")} for r in rows]
    assert [r["trial"] for r in rows] == [0, 1] and all(r["predicted_fps"] > 0 for r in rows)
    out = _search(store, tmp_path, 4, f"search.warm_start_profile={profile}", "search.warm_start_trials=2")
    assert out.returncode == 0 and "warm start" not in out.stdout  # resumed: nothing enqueued again
    assert len([t for t in _study(tmp_path).trials if t.user_attrs.get("warm_start")]) == 2
    from rlbench.report import build_report, load_parent

    result = build_report(load_parent(parent.info.run_id), tmp_path / "report")  # where prediction and trials differ
    assert "predicted_vs_measured" in result["figures"]
    assert any(ln.startswith("model: prediction_error=") and "named on the parent run" in ln for ln in result["lines"])


@pytest.mark.parametrize(("extra", "says"), [
    (["search.warm_start_profile=" + "0" * 32], "search.warm_start_profile=" + "0" * 32 + ": --profile="),
    (["search.warm_start_profile=x", "search.warm_start_trials=9"], "search.warm_start_trials=9: allowed: an integer [1, search.n_trials=3]"),
])
def test_a_bad_warm_start_is_refused_before_any_trial(store, tmp_path, extra, says):
    out = _search(store, tmp_path, 3, *extra)
    assert out.returncode == 2 and says in out.stderr, out.stderr[-2000:]
    with pytest.raises(KeyError):
        optuna.load_study(study_name="ratio", storage=f"sqlite:///{tmp_path}/optuna.db")
