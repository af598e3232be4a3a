"""Every numeric field of every schema is range-checked before any work starts.

The fields are read from the dataclasses (rlbench/config/schema.py and each algorithm's
Schema), so a new int or float field is walked here without editing this file. Each gets 0
and -1 (ints in ABSURD also 10**12): `validate` must refuse the value naming `<key>=`, unless
the (key, value) is in DOCUMENTED, a meaning the schema comments or docs give it.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest
from omegaconf import OmegaConf

from rlbench.config.rules import ConfigError
from rlbench.config.schema import Config
from rlbench.core.algorithms import ALGORITHMS, config_module
from rlbench.core.env_families import family
from rlbench.prepare.validate import validate
from tests.conftest import rlbench_cli, runs


def numeric_fields(cls: type, prefix: str = "") -> list[tuple[str, type]]:
    """(dotted key, int or float) of every int/float field, Optional ones and nested dataclasses included."""
    hints = typing.get_type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint
        if dataclasses.is_dataclass(inner):
            found += numeric_fields(inner, f"{prefix}{f.name}.")
        elif inner in (int, float):
            found.append((f"{prefix}{f.name}", inner))
    return found


CONFIG_FIELDS = numeric_fields(Config)  # `algo` and `env` are typed Any: their packages' Schemas are walked below
# Composition per group: the overrides that select it, and the keys walked on it.
GROUPS: dict[str, tuple[list[str], list[tuple[str, type]]]] = {
    "pong": (
        [],
        [f for f in CONFIG_FIELDS if not f[0].startswith("search.")] + numeric_fields(family("atari").Schema, "env."),
    ),
    "cartpole": (["env=cartpole"], numeric_fields(family("gym").Schema, "env.")),
    "search": (["search=ratio"], [f for f in CONFIG_FIELDS if f[0].startswith("search.")]),
    **{f"algo={name}": ([f"algo={name}"], numeric_fields(config_module(name).Schema, "algo.")) for name in ALGORITHMS},
}

# Values with a documented meaning: accepted by the key's own rule (a cross-key check may
# still refuse them in a given config, naming another key first).
DOCUMENTED: dict[tuple[str, object], str] = {
    ("inference_batch", 0): "0 = lock-step: wait for all envs (schema.py, README)",
    ("inference_batch", -1): "-1 = SEED RL's auto, envs // 2 (schema.py, README)",
    ("seed", 0): "any integer >= 0: numpy's default_rng refuses negative seeds",
    ("eval_envs", 0): "0 = no evaluation envs (schema.py, docs/r2d2.md)",
    ("actor_procs", 0): "0 = the envs step in the job's process (schema.py, docs/actors.md)",
    ("actor_hosts", 0): "0 = no actor tasks on other nodes (schema.py, docs/scale-out.md)",
    ("actor_server.remote_envs", 0): "0 = no actor processes started by hand elsewhere (schema.py)",
    ("eval_epsilon", 0): "a probability: greedy evaluation",
    ("telemetry.trace_window_s", 0): "0 = no trace.json (schema.py, docs/timeline.md)",
    ("env.noop_max", 0): "no random no-ops at reset",
    ("env.sticky_actions", 0): "repeat_action_probability 0: no sticky actions (README: env.sticky_actions=0)",
    ("workload.learner_updates", 0): "no learner updates: actors and inference only (learner_updates != 0 trains)",
    ("workload.max_runtime_s", 0): "0 = no limit (schema.py)",
    ("search.seed", 0): "sampler seed: any integer >= 0 (numpy's RandomState)",
    ("search.retries", 0): "reruns of a died trial: 0 = none",
    ("search.pruner_startup_trials", 0): "0 = prune from the first trial",
    ("verdict.noise_floor_min", 0): "0 = the repeats' own noise floor (schema.py, docs/metrics.md 'The verdict')",
    ("packing.index", 0): "a pack's first job (the sweep sets it; 0 for a job alone)",
    ("sweep.idle_power_s", 0): "0 = the GPU's idle power not measured before the sweep (schema.py SweepOptions)",
    # r2d2
    ("algo.burn_in", 0): "no burn-in: the recurrent state starts from the stored one",
    ("algo.priority_eta", 0): "priority = mean|td| (eta in [0, 1])",
    ("algo.priority_exponent", 0): "alpha 0: uniform replay",
    ("algo.importance_exponent", 0): "beta 0: no importance correction",
    ("algo.grad_clip", 0): "0 = off (r2d2 and vtrace config.py)",
    ("algo.eps_base", 0): "a probability: greedy actors",
    ("algo.eps_alpha", 0): "every actor at eps_base",
    # vtrace
    ("algo.network.lstm_hidden", 0): "vtrace: 0 = no LSTM core (config.py, docs/vtrace.md); r2d2 refuses it",
    ("algo.lambda_", 0): "V-trace lambda in [0, 1]: one-step targets",
    ("algo.baseline_cost", 0): "no baseline loss",
    ("algo.max_abs_reward", 0): "vtrace: 0 = no reward clipping in the loss (SEED's flag default; config.py)",
    ("algo.entropy_cost", 0): "no entropy bonus",
    ("algo.adam_beta1", 0): "the default: SEED's dmlab Adam(beta_1=0)",
    ("algo.rmsprop_alpha", 0): "RMSProp decay in [0, 1)",
    # random
    ("algo.overlap", 0): "random: consecutive unrolls share no step; r2d2 refuses it (>= burn_in + 1)",
}
# lstm_hidden=0 and overlap=0 are documented for one algorithm only: the other must refuse them.
DOCUMENTED_FOR = {("algo.network.lstm_hidden", 0): "algo=vtrace", ("algo.overlap", 0): "algo=random"}

# Ints with an upper bound that is cheap to state, so 10**12 must be refused. Others (actors,
# eval_envs, frames, network widths, replay_capacity, batch sizes, ...) have no such bound.
ABSURD = {"seed", "search.seed", "actor_threads", "sm_limit", "inference_batch", "algo.overlap", "algo.min_replay"}


def cases():
    for group, (_, keys) in GROUPS.items():
        for key, kind in keys:
            for value in (0, -1) if kind is int else (0.0, -1.0):
                yield group, key, value
            if kind is int and key in ABSURD:
                yield group, key, 10**12


CASES = list(cases())
_COMPOSED: dict[str, object] = {}


def test_the_walk_finds_the_fields_and_the_lists_name_no_stale_key():
    walked = {key for _, key, _ in CASES}
    assert {
        "tracking.log_every_s",
        "search.heartbeat_s",
        "algo.network.mlp_hidden",
        "algo.queue_capacity",
        "workload.learner_updates",
        "telemetry.cpu_tdp_w",
        "env.max_episode_frames",
    } <= walked
    assert {key for key, _ in DOCUMENTED} <= walked and walked >= ABSURD


@pytest.mark.parametrize("group, key, value", CASES, ids=[f"{g}:{k}={v}" for g, k, v in CASES])
def test_every_numeric_field_is_range_checked(compose_cfg, group, key, value):
    if group not in _COMPOSED:  # compose once per group; each case validates a copy with one key changed
        _COMPOSED[group] = compose_cfg(GROUPS[group][0])
    cfg = OmegaConf.create(OmegaConf.to_container(_COMPOSED[group], resolve=False))
    OmegaConf.update(cfg, key, value)
    documented = (key, value) in DOCUMENTED and DOCUMENTED_FOR.get((key, value), group) == group
    try:
        validate(cfg)
        message = ""
    except ConfigError as e:
        message = str(e)
    own = [line for line in message.splitlines() if line.strip().startswith(f"{key}=")]
    if documented:
        assert not own, f"{key}={value} means {DOCUMENTED[(key, value)]!r}, but its rule refuses it:\n{message}"
    else:
        assert own and all("allowed" in line for line in own), f"{key}={value} is not refused by a rule:\n{message}"


@pytest.mark.e2e
def test_a_refused_range_starts_no_run(store):
    """The issue's examples: a busy loop and a run that never goes stale; refused before MLflow."""
    out = rlbench_cli(
        ["tracking.log_every_s=-1", "tracking.stale_after_s=0"] + store["overrides"] + ["workload=smoke"], timeout=60
    )
    assert out.returncode == 2, out.stderr[-2000:]  # a refusal (docs/usage.md)
    assert "tracking.log_every_s=-1.0: allowed" in out.stderr and "tracking.stale_after_s=0.0: allowed" in out.stderr, (
        out.stderr
    )
    assert not store["db"].exists() or runs(store["uri"]) == []
