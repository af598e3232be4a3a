"""Every command checks its inputs before work, with one rule and one wording: exit 2, one line
`<prog>: <key or flag>=<value>: ... allowed: ...`, nothing created (issue 25)."""

import argparse
import subprocess
import sys
from types import SimpleNamespace

import pytest

from rlbench.cli.command import Parser
from rlbench.config.flags import existing_store, number, writable_folder
from rlbench.config.rules import ConfigError
from rlbench.prepare.command_line import precheck
from rlbench.prepare.compose import compose_checked
from rlbench.prepare.validate import validate
from tests.conftest import ROOT


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["actors=abc"], "actors=abc: allowed: an integer"),
        (["actors=nan"], "actors=nan: allowed: an integer"),
        (["learner=maybe"], "learner=maybe: allowed: true or false"),
        (["env=pongg"], "env=pongg: no such env preset; allowed: one of breakout, cartpole, pong"),
        (["experiment=nope"], "experiment=nope: no such experiment preset; allowed: one of actor_sweep"),
        (["hydra/sweeper=nope"], "hydra/sweeper=nope: no such hydra/sweeper preset; allowed: one of basic, rlbench"),
        (["actors=[1"], "actors=[1: cannot be parsed"),
        (["foo=1"], "unknown config key 'foo'"),
    ],
)
def test_hydras_errors_become_one_line_naming_the_override(overrides, says):
    with pytest.raises(ConfigError) as e:
        compose_checked(overrides)
    assert says in str(e.value)


def test_a_key_of_another_algorithm_says_which_one_has_it_not_plus():
    """Hydra suggests `+algo.replay_capacity=10`, which would add a key V-trace never reads."""
    with pytest.raises(ConfigError) as e:
        compose_checked(["algo=vtrace", "algo.replay_capacity=10"])
    text = str(e.value)
    assert text.startswith("algo.replay_capacity=10: the selected algorithm vtrace has no key 'replay_capacity'")
    assert "a key of the algorithm r2d2 (select it: algo=r2d2 or algo=r2d2_vector" in text
    with pytest.raises(ConfigError, match="a key of the env family atari"):
        compose_checked(["env=cartpole", "env.img_size=3"])


@pytest.mark.parametrize(
    "override, says",
    [
        ("telemetry.cpu_tdp_w=inf", "telemetry.cpu_tdp_w=inf: allowed: null (no estimate) or watts > 0 (finite"),
        ("telemetry.cpu_tdp_w=nan", "telemetry.cpu_tdp_w=nan: allowed"),
        ("workload.max_runtime_s=inf", "workload.max_runtime_s=inf: allowed"),
        ("env.sticky_actions=nan", "env.sticky_actions=nan: allowed"),
        ("tracking.experiment=", "tracking.experiment='': allowed: a non-empty MLflow experiment name"),
        ("tracking.experiment=' '", "tracking.experiment=' ': allowed: a non-empty"),
    ],
)
def test_non_finite_numbers_and_empty_names_are_refused(compose_cfg, override, says):
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg([override]), host=False)
    assert says in str(e.value)


def test_an_empty_study_name_is_refused(compose_cfg):
    with pytest.raises(ConfigError, match="search.study='': allowed: a non-empty Optuna study name"):
        validate(compose_cfg(["search=ratio", "search.study=''"]), host=False)


def test_inference_batch_is_never_refused_with_its_own_value_listed_as_allowed(compose_cfg):
    """actors=0 makes no envs: the batch rule said `0 (lock-step ...)` is allowed while refusing 0."""
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg(["actors=0", "eval_envs=0", "inference_batch=0"]), host=False)
    assert "inference_batch" not in str(e.value) and "actors=0: allowed" in str(e.value)


@pytest.fixture
def little_memory(monkeypatch):
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=8 * 10**9))


@pytest.mark.parametrize(
    "override, says",
    [
        ("eval_envs=100000", "actors=40 eval_envs=100000: 100040 envs need about 161"),
        ("env.img_size=100000", "4x100000x100000"),
    ],
)
def test_envs_beyond_this_hosts_memory_are_refused_naming_both_numbers(compose_cfg, little_memory, override, says):
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg([override]))
    assert says in str(e.value) and "this host has 8.0 GB available; allowed: at most" in str(e.value)
    validate(compose_cfg(["actors=256"]))  # the study's largest job fits


def test_mps_is_refused_on_a_cpu_device_naming_it(compose_cfg):
    with pytest.raises(ConfigError, match="sm_backend=mps: MPS splits a CUDA GPU and this job's device is cpu"):
        validate(compose_cfg(["device=cpu", "sm_backend=mps", "sm_limit=1"]))


@pytest.mark.parametrize(
    "argv, says",
    [
        (["experiment=actor_sweep"], "experiment=actor_sweep defines a grid (actors=4,8,16,32,40,64,128,256: 8 jobs)"),
        (["experiment=onoff_policy"], "add -m (python -m rlbench -m experiment=onoff_policy)"),
        (["search=ratio"], "add -m"),
        (["repeats=3"], "add -m"),
        (["-m", "actors=abc"], "actors=abc: allowed: an integer"),
        (["-m", "actors=2,4", "env=pongg"], "env=pongg: no such env preset"),
        (["-m", "actors=2,4", "hydra/sweeper=nope"], "allowed: one of basic, rlbench (Hydra's and its plugins')"),
    ],
)
def test_the_command_line_is_checked_before_hydra_runs(argv, says):
    assert says in (precheck(argv) or "")


def test_a_missing_sweeper_plugin_is_named_with_how_to_install_it(monkeypatch):
    """On a GPU host, `pip install --target` into a folder that already held hydra_plugins/ left
    rlbench's sweeper out, and the refusal listed no preset at all ("allowed: one of  (conf/...)")."""
    from hydra.core.config_store import ConfigStore
    from hydra.errors import MissingConfigException

    from rlbench.prepare.hydra_errors import explain

    store = ConfigStore.instance()
    listed = store.list
    monkeypatch.setattr(store, "list", lambda path: [n for n in listed(path) if n != "rlbench.yaml"])
    text = explain(MissingConfigException("Could not find 'hydra/sweeper/rlbench'"), [], ROOT / "conf", None)
    assert text.startswith("hydra/sweeper=rlbench: no such hydra/sweeper preset; allowed: one of basic (Hydra's")
    assert "the plugin hydra_plugins/rlbench_sweeper, not importable here: install rlbench whole" in text


@pytest.mark.parametrize(
    "argv, says",
    [  # each escaped as a traceback while the memory check read the env's spec first
        (["env.id=pongg"], "env.id=pongg: not an ALE ROM name; did you mean pong?"),
        (
            ["env.id=ALE/Pong-v5"],
            "env.id=ALE/Pong-v5: with env.kind=atari use the ALE ROM name in snake_case: env.id=pong",
        ),
        (
            ["env=cartpole", "env.id=ALE/Pong-v5"],
            (
                "env.id=ALE/Pong-v5: an Atari game: image observations need the Atari "
                "env family (env.kind=atari), not env=cartpole's gym family"
            ),
        ),
        (["env=cartpole", "env.id=ALE/Pong-v5"], "drop env=cartpole and give env.id=pong"),
        (["env=cartpole", "env.id=CartPol-v1"], "Environment `CartPol` doesn't exist. Did you mean: `CartPole`?"),
        (["env=cartpole", "env.id=nomodule.envs:MyEnv-v0"], "No module named 'nomodule'"),
        (["env=cartpole", "env.id=NoSuch-v0"], "env.id=NoSuch-v0: gymnasium.make failed: NameNotFound"),
        (["env=cartpole", "env.id=Pendulum-v1"], "env.id=Pendulum-v1: R2D2 needs a Discrete action space"),
        (["env=cartpole", "env.id="], "env.id=: gymnasium.make failed: Error: Malformed environment ID"),
    ],
)
def test_an_env_id_that_cannot_run_is_one_line_before_hydra_runs(argv, says):
    problem = precheck(argv) or ""
    assert problem.startswith("invalid config:\n  env.id=") and says in problem and "Traceback" not in problem


def test_a_grid_with_m_passes_the_precheck():
    assert precheck(["-m", "experiment=actor_sweep"]) is None and precheck(["-m", "actors=2,4"]) is None
    assert precheck(["actors=4"]) is None


def test_flags_are_refused_in_one_line_naming_flag_value_and_rule(capsys):
    p = Parser(prog="rlbench.x")
    p.add_argument("--seconds", type=number(float, lo=0, lo_open=True))
    p.add_argument("--threads", type=number(int, lo=1))
    p.add_argument("--mode", choices=("a", "b"))
    p.add_argument("overrides", nargs="*")
    for argv, says in (
        (["--seconds", "nan"], "rlbench.x: --seconds=nan: allowed: a finite number > 0"),
        (["--seconds", "inf"], "rlbench.x: --seconds=inf: allowed: a finite number > 0"),
        (["--threads", "0"], "rlbench.x: --threads=0: allowed: an integer >= 1"),
        (["--threads", "1.5"], "rlbench.x: --threads=1.5: allowed: an integer >= 1"),
        (["--mode", "c"], "rlbench.x: --mode=c: allowed: one of 'a', 'b'"),
    ):
        with pytest.raises(SystemExit) as e:
            p.parse_args(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.strip() == says, err
    a = p.parse_args(["actors=40", "--threads", "2", "sm_limit=1"])  # options after overrides
    assert a.threads == 2 and a.overrides == ["actors=40", "sm_limit=1"]


def test_number_ranges():
    share = number(float, lo=0, hi=1, hi_open=True)
    assert share("0") == 0 and share("0.5") == 0.5
    for bad in ("1", "-0.1", "nan", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"allowed: a finite number in \[0, 1\)"):
            share(bad)


def test_folders_and_stores_are_checked_without_creating_them(tmp_path):
    (tmp_path / "file").write_text("")
    assert writable_folder("--out", tmp_path / "new" / "deeper") is None and not (tmp_path / "new").exists()
    assert "exists and is not a folder" in writable_folder("--out", tmp_path / "file")
    assert "cannot be written" in writable_folder("--out", tmp_path / "file" / "x")
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]  # the write check left nothing
    assert "does not exist" in existing_store("--tracking-uri", f"sqlite:///{tmp_path}/none.db")
    assert "is a folder" in existing_store("--tracking-uri", f"sqlite:///{tmp_path}")
    assert existing_store("--tracking-uri", "http://127.0.0.1:5000") is None
    assert not (tmp_path / "none.db").exists()


def test_commands_refuse_their_flags_and_overrides_before_work(tmp_path, capsys):
    """predict, profile and report share the parser and compose_job: exit 2, one line, nothing made."""
    from rlbench.cli.predict import main as predict
    from rlbench.cli.profile import main as profile
    from rlbench.cli.report import main as report

    db = f"sqlite:///{tmp_path}/none.db"
    cases = [
        (predict, ["actors=abc", "--tracking-uri", db], "rlbench.predict: actors=abc: allowed: an integer"),
        (predict, ["actors=nan", "--tracking-uri", db], "rlbench.predict: actors=nan: allowed: an integer"),
        (predict, ["foo=1", "--tracking-uri", db], "rlbench.predict: unknown config key 'foo'"),
        (predict, ["actors=4", "--threads", "0"], "rlbench.predict: --threads=0: allowed: an integer >= 1"),
        (predict, ["actors=4", "--tracking-uri", db], "rlbench.predict: --tracking-uri=" + db + ": "),
        (predict, ["--validate", "--sweep", "abc", "--tracking-uri", db], "rlbench.predict: --tracking-uri=" + db),
        (profile, ["env=pongg", "--no-log"], "rlbench.profile: env=pongg: no such env preset"),
        (profile, ["--seconds", "nan"], "rlbench.profile: --seconds=nan: allowed: a finite number > 0"),
        (report, ["--sweep", "abc", "--tracking-uri", db], "rlbench.report: --tracking-uri=" + db),
        (report, ["--sweep", "abc", "--knee-share", "nan"], "rlbench.report: --knee-share=nan: allowed"),
        (
            report,
            ["--sweep", "abc", "--out", "/proc/no/such"],
            "rlbench.report: --out=/proc/no/such: cannot be written",
        ),
    ]
    for command, argv, says in cases:
        try:
            code = command(argv)
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(says) and len(err.strip().splitlines()) == 1, (argv, err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_every_command_refuses_bad_input_with_exit_2_and_creates_nothing(tmp_path):
    """As a user runs them, from an empty folder: one line on stderr, exit 2, the folder still empty."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    cases = [  # the Hydra shell (single run and sweep) and a pipeline; the other commands: in-process above
        (["-m", "rlbench", "actors=abc"], "rlbench: actors=abc: allowed: an integer"),
        (["-m", "rlbench", "env.id=pongg"], "env.id=pongg: not an ALE ROM name"),  # a value: checked before Hydra too
        (["-m", "rlbench", "tracking.uri=runs"], "tracking.uri='runs': allowed: an MLflow tracking URI"),  # a folder
        (["-m", "rlbench", "-m", "search=ratio", "search.storage="], "search.storage='': allowed: a database URL"),
        (["-m", "rlbench", "-m", "hydra/launcher=slurm", "actors=2,4"], "hydra/launcher=slurm: no srun on this host"),
        (["-m", "rlbench", "experiment=actor_sweep"], "rlbench: experiment=actor_sweep defines a grid"),
        (["-m", "rlbench", "-m", "actors=2,x"], "actors=x: allowed: an integer"),
        ([str(ROOT / "pipelines" / "actor_sweep.py"), "experiment=nope"], "pipelines/actor_sweep.py: experiment=nope"),
    ]
    work = tmp_path / "work"
    work.mkdir()
    for args, says in cases:
        out = subprocess.run(
            [sys.executable, *args], cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert out.returncode == 2 and says in out.stderr, (args, out.stderr[-2000:])
        assert "Traceback" not in out.stderr
    assert list(work.iterdir()) == []


NO_METERS = {"gpu": "nvmlInit failed", "rapl": "no /sys/class/powercap", "dram": "no /sys/class/powercap"}


@pytest.mark.parametrize(
    "overrides, objective, why",
    [
        (["learner=false"], "learner_updates_per_s", "learner=false runs no learner"),
        (["learner=false"], "loss", "learner=false runs no learner"),
        (["algo=random"], "loss", "algo=random has no learner"),
        (["eval_envs=0"], "eval_return_mean20", "eval_envs=0 steps no evaluation env"),
        (["device=cpu"], "gpu_busy_frac", "the job's device is cpu, not CUDA"),
        ([], "power_gpu_w_avg", "NVML reads no GPU here (nvmlInit failed)"),
        ([], "energy_gpu_j", "NVML reads no GPU here"),
        (["telemetry.cpu_tdp_w=65"], "perf_per_watt", "leaves out telemetry.cpu_tdp_w's estimate"),
        ([], "energy_per_task_j", "no energy can be measured here"),
        ([], "joules_per_mframe", "or telemetry.cpu_tdp_w=<watts> for a labelled estimate"),
        ([], "energy_cpu_j", "no RAPL here"),
    ],
)
def test_an_objective_the_job_cannot_produce_here_is_refused_naming_why(compose_cfg, overrides, objective, why):
    from rlbench.searches.space import Meters, objective_checks

    conf = validate(
        compose_cfg(["search=ratio", f"search.objectives=[{objective}]", "search.directions=[maximize]", *overrides]),
        host=False,
    )
    (problem,) = objective_checks(conf, Meters(**NO_METERS))
    assert problem.startswith(f"search.objectives=['{objective}']: '{objective}' cannot be produced") and why in problem


@pytest.mark.parametrize(
    "overrides, objective, meters",
    [
        (["telemetry.cpu_tdp_w=65"], "energy_per_task_j", NO_METERS),  # the labelled estimate counts here
        (["telemetry.cpu_tdp_w=65"], "joules_per_mframe", NO_METERS),
        ([], "perf_per_watt", {**NO_METERS, "rapl": None, "dram": None}),
        ([], "perf_per_watt", {**NO_METERS, "plugged": ("fake",)}),
        ([], "power_gpu_w_avg", {**NO_METERS, "gpu": None}),
        ([], "loss", NO_METERS),
        ([], "fps", NO_METERS),
    ],
)
def test_an_objective_the_job_can_produce_passes(compose_cfg, overrides, objective, meters):
    from rlbench.searches.space import Meters, objective_checks

    conf = validate(
        compose_cfg(["search=ratio", f"search.objectives=[{objective}]", "search.directions=[maximize]", *overrides]),
        host=False,
    )
    assert objective_checks(conf, Meters(**meters)) == []


@pytest.mark.parametrize(
    "overrides, meters, objectives, labels, left_out",
    [
        ([], NO_METERS, ["runtime_s"], ["runtime_s"], "energy_per_task_j left out: no energy can be measured here"),
        (
            ["telemetry.cpu_tdp_w=65"],
            NO_METERS,
            ["runtime_s", "energy_per_task_j"],
            ["runtime_s", "energy_per_task_j (estimate)"],
            None,
        ),
        ([], {**NO_METERS, "gpu": None}, ["runtime_s", "energy_per_task_j"], ["runtime_s", "energy_per_task_j"], None),
        (
            ["telemetry.cpu_tdp_w=65"],
            {**NO_METERS, "gpu": None},
            ["runtime_s", "energy_per_task_j"],
            ["runtime_s", "energy_per_task_j"],
            None,
        ),  # NVML measures the GPU: the CPU's share is estimated, not the task
    ],
)
def test_the_default_objectives_are_the_tasks_time_then_its_energy_where_a_job_gets_it(
    compose_cfg, overrides, meters, objectives, labels, left_out
):
    from rlbench.searches.space import Meters, default_objectives, objective_checks, objective_labels

    conf = validate(compose_cfg(["search=ratio", *overrides]), host=False)
    assert conf.search.objectives == [] and conf.search.directions == []  # the schema's default: chosen per host
    names, directions, note = default_objectives(conf, Meters(**meters))
    assert (names, directions) == (objectives, ["minimize"] * len(objectives))
    assert (note is None) == (left_out is None) and (left_out is None or left_out in note)
    conf.search.objectives, conf.search.directions = names, directions
    assert objective_labels(conf, Meters(**meters)) == labels and objective_checks(conf, Meters(**meters)) == []


def test_an_energy_objective_with_no_meter_and_no_estimate_names_both_ways_out(compose_cfg):
    from rlbench.searches.space import Meters, objective_checks

    conf = validate(
        compose_cfg(
            ["search=ratio", "search.objectives=[runtime_s,energy_per_task_j]", "search.directions=[minimize,minimize]"]
        ),
        host=False,
    )
    (problem,) = objective_checks(conf, Meters(**NO_METERS))
    assert "'energy_per_task_j' cannot be produced" in problem and "a meter (NVML's GPU, RAPL" in problem
    assert "telemetry.cpu_tdp_w=<watts>" in problem


@pytest.mark.parametrize(
    "extra, says",
    [
        (["experiment=nope"], "pipelines/actor_sweep.py: experiment=nope: no such experiment preset"),
        (["tracking=nope"], "pipelines/actor_sweep.py: tracking=nope: no such tracking preset"),
        (["actors=abc"], "pipelines/actor_sweep.py: actors=abc: allowed: an integer"),
        (["--report-out", "/proc/no/such"], "pipelines/actor_sweep.py: --report-out=/proc/no/such: cannot be written"),
    ],
)
def test_a_pipeline_refuses_its_overrides_with_exit_2_before_starting_rlbench(monkeypatch, capsys, extra, says):
    """The README: a pipeline exits 2 when the command is refused before any job (it exited 1)."""
    from rlbench.cli import run_and_report

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(run_and_report, "run_sweep_command", lambda o: pytest.fail(f"rlbench started: {o}"))
    with pytest.raises(SystemExit) as e:
        run_and_report.run_pipeline("actor_sweep", ["experiment=actor_sweep"], [], extra)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(says) and len(err.strip().splitlines()) == 1, err


def test_three_refusals_name_what_is_allowed_through_the_commands(store, rlbench_main, capsys):
    """Through `python -m rlbench` (in-process) and `python -m rlbench.predict`: an added key
    that does not exist names the keys allowed; an Atari id in the gym family names the Atari
    family; a single run given as a sweep says it is not a sweep's parent."""
    import mlflow

    from rlbench.cli.predict import main as predict_main

    out = rlbench_main(["+actors_x=4", *store["overrides"]])
    assert out.returncode == 2 and out.stderr.startswith(
        "rlbench: unknown config key '+actors_x' (value '4'); allowed top-level keys: actor_hosts, "
    ), out.stderr[-2000:]
    assert "did you mean 'actors'?" in out.stderr
    out = rlbench_main(["env=cartpole", "env.id=ALE/Pong-v5", *store["overrides"]])
    assert (
        out.returncode == 2
        and "env.id=ALE/Pong-v5: an Atari game: image observations need the Atari env family (env.kind=atari)"
        in out.stderr
        and "Namespace" not in out.stderr
    ), out.stderr[-2000:]
    client = mlflow.MlflowClient(store["uri"])
    exp = client.create_experiment("test", artifact_location=str(store["db"].parent / "artifacts"))
    single = client.create_run(exp, run_name="a single run").info.run_id
    client.set_terminated(single, "FINISHED")
    capsys.readouterr()
    assert predict_main(["--validate", "--sweep", single, "--tracking-uri", store["uri"], "--no-log"]) == 2
    assert capsys.readouterr().err == (
        f"rlbench.predict: --sweep {single}: run 'a single run' is not a sweep's "
        "parent (it has no child runs: a single job's run?); give a sweep's parent run "
        "id (the sweep prints it: '[rlbench sweep] parent run <id>')\n"
    )
