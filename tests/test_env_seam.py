"""The env family seam: a test-only family (tests/env_tiny/, a numpy corridor named nowhere in
rlbench) is validated, sized, predicted and run as a real job from the command line; an unknown
family and one missing a declaration are refused naming what is wrong. rlbench asks each
family through its declarations (rlbench/core/env_families.py), never by its name or its keys."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from rlbench.core.env_families import DECLARED, ENV_VAR, FAMILIES, EnvFamilyError, family
from tests.conftest import rlbench_cli, runs

# r2d2 on vector observations, a task of seconds: 2 actors x 1500 steps, 2 updates after 16 sequences
TINY = [
    "env=tiny",
    "algo=r2d2_vector",
    "workload=smoke",
    "workload.frames=3000",
    "workload.learner_updates=2",
    "algo.min_replay=16",
    "actors=2",
    "progress=log",
]


@pytest.fixture
def tiny():
    """`tiny` registered in this process, as a contributor's package would be."""
    from rlbench.config.schema import register_configs

    FAMILIES.register("tiny", "tests.env_tiny")
    register_configs()  # its schema, and `env=tiny` as an option of the env group
    yield "tiny"
    FAMILIES.unregister("tiny")


def test_an_unknown_family_and_a_missing_declaration_are_refused_naming_them(monkeypatch):
    with pytest.raises(EnvFamilyError, match=r"env.kind='nope': no such env family; known: atari, gym \("):
        family("nope")
    partial = types.ModuleType("partial_env.family")
    partial.Schema, partial.OBSERVATION = object, "vector"  # a family that forgot the rest
    monkeypatch.setitem(sys.modules, "partial_env", types.ModuleType("partial_env"))
    monkeypatch.setitem(sys.modules, "partial_env.family", partial)
    with pytest.raises(EnvFamilyError) as e:  # refused at registration, naming what it lacks
        FAMILIES.register("partial", "partial_env")
    missing = [d for d in DECLARED if d not in ("Schema", "OBSERVATION")]
    assert f"env family 'partial' (partial_env.family) does not declare {', '.join(missing)}" in str(e.value)
    assert "partial" not in FAMILIES
    partial.__dict__.update({d: None for d in DECLARED if d not in ("Schema", "OBSERVATION")})
    partial.OBSERVATION = "pixels"
    with pytest.raises(EnvFamilyError, match="OBSERVATION='pixels'; allowed: one of image, vector"):
        FAMILIES.register("partial", "partial_env")
    assert "partial" not in FAMILIES
    with pytest.raises(EnvFamilyError, match="built in"):
        FAMILIES.register("gym", "partial_env")
    with pytest.raises(EnvFamilyError, match="env family 'absent': no module no_such_package.family"):
        FAMILIES.register("absent", "no_such_package")
    assert "absent" not in FAMILIES


def test_validate_refuses_an_unknown_kind_naming_the_families(compose_cfg):
    from rlbench.config.rules import ConfigError
    from rlbench.prepare.validate import validate

    with pytest.raises(ConfigError, match=r"env.kind='nope': allowed: one of atari, gym \(a package in rlbench/envs/"):
        validate(compose_cfg(["env.kind=nope"]))


def test_the_environment_variable_names_families_by_package():
    from rlbench.core.env_families import EnvFamilyError as Error

    assert FAMILIES.parse_env("tiny=tests.env_tiny, other=x.y") == {"tiny": "tests.env_tiny", "other": "x.y"}
    with pytest.raises(Error, match=f"{ENV_VAR}='tiny': 'tiny' is not name=target"):
        FAMILIES.parse_env("tiny")


def test_tiny_declares_what_validate_the_job_and_predict_ask(tiny, compose_cfg):
    from rlbench.config.rules import ConfigError
    from rlbench.envs.spec import check_env, env_spec
    from rlbench.predict.curves import profile_command
    from rlbench.prepare.plan import envs_of
    from rlbench.prepare.validate import validate
    from rlbench.tracking.dataset import env_dataset

    conf = validate(compose_cfg([*TINY, "actors=4", "eval_envs=2", "inference_batch=1", "actor_threads=1"]))
    assert (conf.env.kind, conf.env.id, conf.env.length, conf.env.frameskip) == ("tiny", "corridor", 5, 1)
    assert (
        envs_of(conf).inference_batch == envs_of(conf).total == 6
    )  # no partial batches: lock-step, whatever was asked
    assert family("tiny").hardware_threads(8, 8) == 1 and envs_of(conf, cores=8).actor_threads == 1
    s = env_spec(conf.env)
    assert (s.obs_shape, s.obs_dtype, s.num_actions, s.stack) == ((2,), np.float32, 3, 1)
    assert "the tiny family has corridor" in check_env(family("tiny").Schema(id="maze"))
    d = env_dataset(conf.env)
    assert (d.name, d.source.url) == ("corridor (tiny, frameskip 1)", "https://example.org/rlbench-tiny/corridor")
    assert profile_command("corridor", "tiny", "r2d2") == "python -m rlbench.profile env=tiny algo=r2d2_vector"
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg([*TINY, "env.length=1", "inference_batch=7", "algo=r2d2"]))
    assert "env.length=1: allowed: an integer >= 2" in str(e.value)
    assert "tiny envs always step in lock-step" in str(e.value)
    e2 = pytest.raises(ConfigError, validate, compose_cfg([*TINY, "algo=r2d2"]))
    assert "tiny envs give vector observations; use mlp (algo=r2d2_vector)" in str(e2.value)


def test_the_corridor_is_deterministic_and_restarts_in_the_same_step(tiny):
    def episode_log(seed: int) -> list:
        env = family("tiny").make(family("tiny").Schema(length=3, max_steps=4), 2, 1, -1)
        log = [env.reset(seed).obs.tolist()]
        for _ in range(10):
            env.send(np.array([2, 0]))  # env 0 walks to the goal, env 1 into the wall
            b = env.recv()
            log.append((b.obs.tolist(), b.reward.tolist(), b.done.tolist()))
        return log

    log = episode_log(7)
    assert log == episode_log(7) and log != episode_log(8)
    rewards, dones = np.array([r for _, r, _ in log[1:]]), np.array([d for _, _, d in log[1:]])
    assert rewards[:, 0].sum() >= 3 and rewards[:, 1].sum() == 0  # env 0 reaches the goal every episode or two
    assert dones[3, 1] and not dones[:3, 1].any()  # env 1 is truncated after max_steps = 4
    assert log[4][0][1][1] == 0.0  # and the done step shows its next episode's first observation


@pytest.mark.e2e
def test_a_job_with_the_tiny_family_from_the_cli_records_its_frames_and_episodes(store):
    """The CLI sees tiny through RLBENCH_ENV_FAMILIES (no file of rlbench names it)."""
    from rlbench.core.metrics import declared

    out = rlbench_cli([*TINY, *store["overrides"]], timeout=300, extra_env={ENV_VAR: "tiny=tests.env_tiny"})
    assert out.returncode == 0, out.stderr[-3000:]
    (run,) = runs(store["uri"])
    m, params = run.data.metrics, run.data.params
    assert run.info.status == "FINISHED"
    assert (params["env.kind"], params["env.id"], params["env.length"]) == ("tiny", "corridor", "5")
    assert 3000 <= m["frames"] < 3000 + 2 and m["fps"] == pytest.approx(m["sps"], rel=1e-5)  # frameskip 1
    assert m["episodes"] >= 3000 / 20 and 0 <= m["episode_return_mean20"] <= 1  # corridor episodes pay 0 or 1
    assert m["learner_updates"] == 2 and run.data.tags["inference_batch_used"] == "2"  # lock-step
    assert [k for k in m if not declared(k)] == []  # the family adds no metric: the contract holds
    assert [(d.dataset.name, d.tags[0].value) for d in run.inputs.dataset_inputs] == [
        ("corridor (tiny, frameskip 1)", "environment")
    ]
