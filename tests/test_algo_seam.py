"""The algorithm seam: a test-only algorithm (tests/algo_tiny/, named nowhere in rlbench) runs
through a job, a 2-job sweep, the report and predict; a package missing a declaration is
refused naming what it lacks. rlbench asks each algorithm through its declarations
(rlbench/core/algorithms.py), never by its name or its config keys."""

from __future__ import annotations

import re
import sys
import types

import mlflow
import pytest

from rlbench.core.algorithms import ALGORITHMS, DECLARED, AlgorithmError, config_module
from tests.conftest import rlbench_cli, runs

TINY = ["env=cartpole", "algo=tiny", "workload=smoke", "workload.frames=1500", "progress=log"]


@pytest.fixture
def tiny():
    """`tiny` registered in this process, as a contributor's package would be."""
    from rlbench.config.schema import register_configs

    ALGORITHMS.register("tiny", "tests.algo_tiny")
    register_configs()  # its schema, and `algo=tiny` as an option of the algo group
    yield "tiny"
    ALGORITHMS.unregister("tiny")


def test_an_unknown_algorithm_and_a_missing_declaration_are_refused_naming_them(monkeypatch):
    with pytest.raises(AlgorithmError, match=r"algo.name='nope': no such algorithm; known: r2d2, vtrace, random"):
        config_module("nope")
    partial = types.ModuleType("partial_algo.config")
    partial.Schema, partial.LEARNS = object, True  # a package that forgot the rest
    monkeypatch.setitem(sys.modules, "partial_algo", types.ModuleType("partial_algo"))
    monkeypatch.setitem(sys.modules, "partial_algo.config", partial)
    with pytest.raises(AlgorithmError) as e:  # refused at registration, naming what it lacks
        ALGORITHMS.register("partial", "partial_algo")
    missing = [d for d in DECLARED if d not in ("Schema", "LEARNS")]
    assert f"algorithm 'partial' (partial_algo.config) does not declare {', '.join(missing)}" in str(e.value)
    assert "partial" not in ALGORITHMS
    with pytest.raises(AlgorithmError, match="built in"):
        ALGORITHMS.register("r2d2", "partial_algo")
    with pytest.raises(AlgorithmError, match="algorithm 'absent': no module no_such_package.config"):
        ALGORITHMS.register("absent", "no_such_package")
    assert "absent" not in ALGORITHMS


def test_the_contracts_are_protocols_and_declared_is_read_from_them():
    from rlbench.core.algorithms import AlgorithmPlugin
    from rlbench.core.env_families import DECLARED as ENV_DECLARED
    from rlbench.core.env_families import EnvFamily
    from rlbench.core.registry import protocol_members

    assert protocol_members(AlgorithmPlugin) == DECLARED and DECLARED[:2] == ("Schema", "LEARNS")
    assert "profile_overrides" in DECLARED and protocol_members(EnvFamily) == ENV_DECLARED
    assert {"spec", "make", "OBSERVATION"} <= set(ENV_DECLARED)


def test_tiny_declares_what_predict_and_the_report_ask(tiny, compose_cfg):
    from rlbench.core.algorithms import on_policy
    from rlbench.predict import model
    from rlbench.predict.curves import profile_command
    from rlbench.predict.jobs import learner_data, unroll_queue
    from rlbench.prepare.validate import validate
    from rlbench.report.rules import on_off_policy

    conf = validate(compose_cfg([*TINY, "actors=2", "eval_envs=0"]))
    assert (conf.algo.name, conf.algo.batch_size) == ("tiny", 4)
    # batch_size unrolls of 8 steps, an actor's next one 7 steps on
    assert learner_data(conf) == (model.learner_start_steps(2, 4, 8, 7), 28.0) and unroll_queue(conf) is None
    assert profile_command("CartPole-v1", "gym", "tiny") == "python -m rlbench.profile env=cartpole algo=tiny"
    assert on_policy("tiny") is True and on_policy("r2d2") is False and on_policy("gone") is None
    onoff = on_off_policy({"tiny": [(0.6, 0.1)], "r2d2": [(0.2, 0.5)], "gone": [(0.9, 0.0)]})
    assert (onoff.on, onoff.off, onoff.ratio) == ("tiny", "r2d2", pytest.approx(3.0))


@pytest.mark.e2e
def test_tiny_job_in_process(tiny, compose_cfg, store):
    from rlbench.core.metrics import declared
    from rlbench.prepare.job import job_of
    from rlbench.train.job import run_job

    args = [*TINY, "actors=2"]
    final = run_job(job_of(compose_cfg([*args, *store["overrides"]]), args))
    (run,) = runs(store["uri"])
    assert run.info.status == "FINISHED" and run.data.params["algo.name"] == "tiny"
    assert final["learner_updates"] == run.data.metrics["learner_updates"] > 0
    assert run.data.metrics["unrolls"] >= 4 * final["learner_updates"]
    assert run.data.metrics["op_frac/learner/queue_get"] > 0
    assert [k for k in run.data.metrics if not declared(k, "tiny")] == []  # it logs only contract names
    assert run.data.metrics["tiny/mean_reward"] == final["tiny/mean_reward"]  # its own metric, declared in its package


@pytest.mark.e2e
def test_tiny_sweep_from_the_cli_then_its_report_and_prediction(tiny, store, tmp_path, capsys):
    """The CLI sees tiny through RLBENCH_ALGORITHMS (no file of rlbench names it); the report
    and predict run in this process, where the fixture registered it."""
    from rlbench.cli.predict import main as predict_main
    from rlbench.cli.profile import main as profile_main
    from rlbench.cli.report import main as report_main

    out = rlbench_cli(
        ["-m", "actors=2,4", *TINY, *store["overrides"]],
        timeout=300,
        extra_env={"RLBENCH_ALGORITHMS": "tiny=tests.algo_tiny"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (parent,) = [r.info.run_id for r in runs(store["uri"]) if r.data.tags.get("rlbench.role") == "sweep"]
    kids = [r for r in runs(store["uri"]) if r.data.tags.get("mlflow.parentRunId") == parent]
    assert sorted(r.data.params["actors"] for r in kids) == ["2", "4"]
    assert all(r.info.status == "FINISHED" and r.data.metrics["learner_updates"] > 0 for r in kids)

    assert report_main(["--sweep", parent, "--tracking-uri", store["uri"], "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.html").exists()
    mlflow.set_tracking_uri(store["uri"])
    assert "report/report.html" in {a.path for a in mlflow.MlflowClient().list_artifacts(parent, "report")}

    capsys.readouterr()
    assert (
        profile_main(
            [
                "--threads",
                "1",
                "--envs",
                "2,4",
                "--batches",
                "2,4",
                "--units",
                "1",
                "--seconds",
                "0.2",
                "--repeats",
                "3",
                "--updates",
                "1",
                "--corun-envs",
                "4",
                "--tracking-uri",
                store["uri"],
                "env=cartpole",
                "algo=tiny",
                "eval_envs=0",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert predict_main(["--validate", "--sweep", parent, "--tracking-uri", store["uri"], "--no-log"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^prediction_error=[0-9.]+$", printed.strip().splitlines()[-1]), printed[-2000:]
