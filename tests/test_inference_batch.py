"""inference_batch: -1 (the default) is SEED RL's auto rule, 0 lock-step, k the first k ready;
one function resolves it (rlbench/envs/vector.py) for the actors, validation and predict."""

import pytest

from rlbench.config.rules import ConfigError
from rlbench.envs.vector import resolve_inference_batch
from rlbench.prepare.plan import envs_of
from rlbench.prepare.validate import validate


def seed_auto(num_envs: int, env_batch_size: int = 1) -> int:
    """SEED RL common/utils.py validate_learner_config, one host: inference_batch_size -1."""
    return max(env_batch_size, num_envs // 2)


@pytest.mark.parametrize("envs", [1, 2, 3, 5, 6, 41, 42, 43, 258])
def test_auto_is_seeds_rule(envs):
    assert resolve_inference_batch(-1, envs) == seed_auto(envs)


def test_auto_counts_eval_envs_and_rounds_down_odd_counts():
    assert resolve_inference_batch(-1, 40 + 2) == 21  # actors 40 + 2 eval envs
    assert resolve_inference_batch(-1, 256 + 2) == 129
    assert resolve_inference_batch(-1, 4 + 2) == 3
    assert resolve_inference_batch(-1, 41) == 20 and resolve_inference_batch(-1, 3) == 1


def test_one_env_is_lock_step_and_zero_or_k_beyond_the_envs_too():
    assert resolve_inference_batch(-1, 1) == 1  # max(1, 0): all of them
    assert resolve_inference_batch(0, 42) == 42
    assert resolve_inference_batch(42, 42) == 42 and resolve_inference_batch(100, 42) == 42
    assert resolve_inference_batch(5, 42) == 5 and resolve_inference_batch(1, 2) == 1


def test_a_family_without_partial_batches_always_steps_in_lock_step():
    for asked in (-1, 0, 3):
        assert resolve_inference_batch(asked, 10, partial=False) == 10


def test_below_minus_one_is_refused():
    with pytest.raises(ValueError, match="inference_batch=-2: allowed"):
        resolve_inference_batch(-2, 10)


def test_a_jobs_envs_are_the_ones_build_trainer_steps(compose_cfg):
    conf = validate(compose_cfg(["actors=40"]))
    assert conf.inference_batch == -1 and envs_of(conf).total == 42 and envs_of(conf).inference_batch == 21
    rnd = validate(compose_cfg(["actors=40", "algo=random"]))  # no eval envs without a learned policy
    assert envs_of(rnd).total == 40 and envs_of(rnd).inference_batch == 20
    assert envs_of(validate(compose_cfg(["actors=40", "inference_batch=0"]))).inference_batch == 42
    assert envs_of(validate(compose_cfg(["actors=1", "eval_envs=0"]))).inference_batch == 1
    cart = validate(compose_cfg(["env=cartpole", "actors=8"]))
    assert envs_of(cart).inference_batch == envs_of(cart).total


@pytest.mark.parametrize("value", [-1, 0, 1, 41])
def test_validation_accepts_auto_lock_step_and_fewer_than_the_envs(compose_cfg, value):
    assert validate(compose_cfg(["actors=40", f"inference_batch={value}"])).inference_batch == value


@pytest.mark.parametrize(
    "overrides, value",
    [(["actors=40"], 42), (["actors=40"], -2), (["actors=40", "algo=random"], 40), (["actors=1", "eval_envs=0"], 1)],
)
def test_validation_refuses_naming_key_value_and_what_is_allowed(compose_cfg, overrides, value):
    with pytest.raises(ConfigError) as e:
        validate(compose_cfg([*overrides, f"inference_batch={value}"]))
    (line,) = [ln.strip() for ln in str(e.value).splitlines() if ln.strip().startswith("inference_batch=")]
    assert line.startswith(f"inference_batch={value}: allowed: -1 (SEED RL's auto") and "0 (lock-step" in line
    n = envs_of(validate(compose_cfg(overrides))).total
    assert (f"[1, {n - 1}]" in line) if n > 1 else ("one env" in line)


def test_the_refusal_says_gym_steps_in_lock_step(compose_cfg):
    with pytest.raises(ConfigError, match="gym envs always step in lock-step"):
        validate(compose_cfg(["env=cartpole", "actors=4", "inference_batch=100"]))


def test_predict_models_the_resolved_batch(compose_cfg):
    from rlbench.predict import model
    from rlbench.predict.jobs import Machine, predict_job
    from tests.test_predict_jobs import prof

    m = Machine(prof(env_id="pong"), prof(env_id="pong"))
    auto = predict_job(validate(compose_cfg(["actors=40", "learner=false", "sm_limit=1"])), m)
    lock = predict_job(validate(compose_cfg(["actors=40", "learner=false", "sm_limit=1", "inference_batch=0"])), m)
    assert auto.knobs["inference_batch"] == 21 and auto.actor_bound != model.SYNC
    assert lock.knobs["inference_batch"] == 42 and lock.actor_bound == model.SYNC


def test_atari_actors_step_the_resolved_batch(compose_cfg):
    from rlbench.envs.vector import make_actors

    conf = validate(compose_cfg(["actors=4", "eval_envs=2"]))
    env = make_actors(conf.env, envs_of(conf).total, 1, conf.inference_batch)
    try:
        assert env.inference_batch == 3 and len(env.reset(seed=1).env_ids) == 3
    finally:
        env.close()
