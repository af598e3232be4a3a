"""The profile's measurements on a tiny budget with the real components, and the fit by hand."""

import pytest

from rlbench.predict.measure import env_curve, fit_inference, inference_curve, update_time


def test_fit_inference_recovers_a_line_and_clips_a_negative_intercept():
    rows = [{"units": 1, "batch": b, "seconds": 0.002 + 0.0001 * b} for b in (1, 8, 64)]
    rows += [{"units": 2, "batch": b, "seconds": 0.001 * b} for b in (4, 8)]
    rows += [{"units": 4, "batch": b, "seconds": s} for b, s in ((10, 0.009), (20, 0.021))]  # line hits -0.003
    fit = fit_inference(rows)
    assert fit[1] == pytest.approx((0.002, 0.0001)) and fit[2] == pytest.approx((0.0, 0.001), abs=1e-12)
    assert fit[4][0] == 0.0 and fit[4][1] == pytest.approx((10 * 0.009 + 20 * 0.021) / (100 + 400))
    noisy_flat = [{"units": 1, "batch": b, "seconds": s} for b, s in ((1, 0.00105), (4, 0.00100), (8, 0.00098))]
    assert fit_inference(noisy_flat)[1] == (pytest.approx(0.00101), 0.0)  # a falling line: flat at the mean
    with pytest.raises(ValueError, match="units=3"):
        fit_inference([{"units": 3, "batch": 4, "seconds": 0.1}])


def test_env_and_inference_curves_on_cartpole(compose_cfg):
    from rlbench.prepare.validate import validate

    conf = validate(compose_cfg(["env=cartpole", "actors=4"]))
    rows = env_curve(conf.env, [(1, 2), (1, 8)], seconds=0.2)
    assert [(r["threads"], r["envs"]) for r in rows] == [(1, 2), (1, 8)]
    assert all(r["sps"] > 0 and r["env_step_s"] == pytest.approx(1 / r["sps"]) for r in rows)  # one thread
    inf = inference_curve(conf, batches=[1, 8], units=[1], repeats=3)
    assert [(r["units"], r["batch"]) for r in inf] == [(1, 1), (1, 8)] and all(r["seconds"] > 0 for r in inf)


@pytest.mark.parametrize("algo", ["r2d2_vector", "vtrace_vector"])
def test_update_time_of_each_learner_on_cartpole(compose_cfg, algo):
    from rlbench.prepare.validate import validate

    conf = validate(compose_cfg(["env=cartpole", f"algo={algo}", "actors=4", "eval_envs=0"]))
    timed = update_time(conf, units=1, repeats=2)
    assert timed["units"] == 1 and 0 < timed["seconds"] < 30 and timed["first_s"] > 0


def test_update_time_refuses_an_algorithm_without_a_learner(compose_cfg):
    from rlbench.prepare.validate import validate

    conf = validate(compose_cfg(["env=cartpole", "algo=random", "actors=2", "eval_envs=0"]))
    with pytest.raises(ValueError, match="algo.name=random"):
        update_time(conf, units=1)


@pytest.mark.e2e  # the profile command, in-process: real measurements, a run logged to MLflow
def test_profile_command_on_a_tiny_budget_logs_its_curves(store, capsys):
    import mlflow

    from rlbench.cli.profile import main

    assert (
        main(
            [
                "--threads",
                "1",
                "--envs",
                "2",
                "--batches",
                "1,4",
                "--units",
                "1",
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
                "--experiment",
                "prof",
                "env=cartpole",
                "eval_envs=0",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "env stepping: 1 threads x 2 envs" in out and "central inference at 1 units" in out
    mlflow.set_tracking_uri(store["uri"])
    (run,) = mlflow.search_runs(experiment_names=["prof"], output_format="list")
    assert run.data.tags["rlbench.role"] == "profile" and run.data.tags["hardware_threads"]
    names = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"env.json", "inference.json", "update.json", "corun.json", "profile.png"} <= names
    assert run.data.tags["profile_device"] == "cpu" and int(run.data.tags["compute_units_total"]) >= 1
    assert run.data.metrics["inference_fixed_ms/1"] >= 0 and run.data.metrics["inference_per_env_ms/1"] >= 0


def test_profile_command_refuses_bad_input_before_measuring(capsys):
    from rlbench.cli.profile import main

    with pytest.raises(SystemExit) as e:
        main(["--units", "0"])
    assert (
        e.value.code == 2
        and capsys.readouterr().err == "rlbench.profile: --units=0: allowed: comma-separated integers >= 1, e.g. 1,2\n"
    )
    assert main(["actors=0", "--no-log"]) == 2
    assert main(["--units", "999", "--no-log", "env=cartpole"]) == 2
    assert "--units=[999]: allowed: threads in 1.." in capsys.readouterr().err


def test_corun_times_the_actor_loop_alone_and_beside_the_learner(compose_cfg):
    from rlbench.predict.measure import corun
    from rlbench.prepare.validate import validate

    conf = validate(compose_cfg(["env=cartpole", "algo=r2d2_vector", "actors=4", "eval_envs=0"]))
    r = corun(conf, envs=4, threads=1, units=1, seconds=0.3, updates=1)
    assert (r["units"], r["envs"], r["threads"]) == (1, 4, 1)
    assert r["loop_sps"] > 0 and r["corun_sps"] > 0 and r["corun_update_s"] > 0
