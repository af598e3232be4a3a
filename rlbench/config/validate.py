"""Range checks that types cannot express, run before any work starts.

`validate(cfg)` turns the composed DictConfig into the typed `Config` (OmegaConf.to_object)
and checks every rule below; all violations are reported together, each as
`<key>=<value>: <what is allowed>`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlbench.algo.r2d2_sequences import sequences_per_actor, unroll_layout
from rlbench.config.derived import replay_capacity, sequence_bytes, task_learner_updates
from rlbench.config.schema import Config
from rlbench.resources import usable_cpus


class ConfigError(ValueError):
    """A config value is outside what rlbench accepts; the message names key, value, rule."""


def _int_at_least(lo: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v >= lo), f"an integer >= {lo}"


def _optional_in(lo: int, hi: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v is None or lo <= v <= hi), f"null or an integer in [{lo}, {hi}]"


def _one_of(*allowed: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in allowed), "one of " + ", ".join(allowed)


def _rules(c: Config) -> dict[str, tuple[Callable[[Any], bool], str]]:
    a = c.algo
    length, _ = unroll_layout(a.burn_in, a.seq_len, a.overlap)
    return {
        "actors": _int_at_least(1),
        "actor_threads": _optional_in(1, len(usable_cpus())),
        "sm_limit": ((lambda v: v is None or v >= 1), "null (all) or an integer >= 1"),
        "inference_batch": ((lambda v: 0 <= v <= c.actors), f"0 (all actors) or an integer in [1, actors={c.actors}]"),
        "device": ((lambda v: re.fullmatch(r"auto|cpu|cuda(:\d+)?", v) is not None), "auto, cpu, cuda or cuda:<index>"),
        "sm_backend": _one_of("green_context", "mps"),
        "policy": _one_of("r2d2", "random"),
        "progress": _one_of("auto", "bar", "log"),
        "env.kind": _one_of("atari", "gym"),
        "env.frameskip": _int_at_least(1),
        "env.stack": _int_at_least(1),
        "env.img_size": _int_at_least(36),
        "env.noop_max": _int_at_least(0),
        "env.sticky_actions": ((lambda v: 0.0 <= v <= 1.0), "a probability in [0, 1]"),
        "env.max_episode_frames": _int_at_least(1),
        "workload.frames": _int_at_least(1),
        "workload.learner_updates": ((lambda v: v is None or v >= 0),
                                     "null (follows from frames and algo.samples_per_insert) or an integer >= 0"),
        "eval_envs": _int_at_least(0),
        "eval_epsilon": ((lambda v: 0.0 <= v <= 1.0), "a probability in [0, 1]"),
        "workload.max_runtime_s": ((lambda v: v >= 0), "seconds >= 0 (0 = no limit)"),
        "tracking.uri": ((lambda v: bool(v and v.strip())),
                         ("an MLflow tracking URI (not empty; check MLFLOW_TRACKING_URI): sqlite:///path.db, "
                          "http(s)://host:port, postgresql://...")),
        "telemetry.rate_hz": ((lambda v: 0 < v <= 1000), "a rate in (0, 1000] Hz"),
        "telemetry.cpu_tdp_w": ((lambda v: v is None or v > 0), "null (no estimate) or watts > 0"),
        "algo.network.torso": _one_of("nature_cnn", "mlp"),
        "algo.network.mlp_hidden": _int_at_least(1),
        "algo.network.lstm_hidden": _int_at_least(1),
        "algo.network.head_hidden": _int_at_least(1),
        "algo.burn_in": _int_at_least(0),
        "algo.n_step": _int_at_least(1),
        "algo.seq_len": _int_at_least(1),
        "algo.overlap": ((lambda v: v is None or a.burn_in + 1 <= v <= length // 2),
                         (f"null (= burn_in + 1: trained steps tile the stream) or an integer in "
                          f"[burn_in + 1 = {a.burn_in + 1}, (burn_in + seq_len + 1) // 2 = {length // 2}]")),
        "algo.discount": ((lambda v: 0.0 < v <= 1.0), "a number in (0, 1]"),
        "algo.rescale_eps": ((lambda v: v > 0), "a number > 0"),
        "algo.priority_eta": ((lambda v: 0.0 <= v <= 1.0), "a number in [0, 1]"),
        "algo.priority_exponent": ((lambda v: v >= 0), "a number >= 0"),
        "algo.importance_exponent": ((lambda v: v >= 0), "a number >= 0"),
        "algo.replay_capacity": _int_at_least(1),
        "algo.replay_memory_gb": ((lambda v: v is None or v > 0), "null (use algo.replay_capacity) or gigabytes > 0"),
        "algo.min_replay": ((lambda v: 1 <= v <= a.replay_capacity or a.replay_memory_gb is not None),
                            f"an integer in [1, algo.replay_capacity={a.replay_capacity}]"),
        "algo.samples_per_insert": ((lambda v: v >= 0), "a number >= 0 (0 = unthrottled)"),
        "algo.rate_limit": _one_of("learner", "both"),
        "algo.batch_size": _int_at_least(1),
        "algo.learning_rate": ((lambda v: v > 0), "a number > 0"),
        "algo.adam_eps": ((lambda v: v > 0), "a number > 0"),
        "algo.grad_clip": ((lambda v: v >= 0), "a number >= 0 (0 = off)"),
        "algo.target_update": _int_at_least(1),
        "algo.publish_every": _int_at_least(1),
        "algo.eps_base": ((lambda v: 0.0 <= v <= 1.0), "a probability in [0, 1]"),
        "algo.eps_alpha": ((lambda v: v >= 0), "a number >= 0"),
    }


def _get(c: Config, dotted: str) -> Any:
    obj: Any = c
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _cross_checks(c: Config) -> list[str]:
    problems = []
    if c.env.kind == "gym" and c.algo.network.torso == "nature_cnn":
        problems.append("algo.network.torso=nature_cnn: gym envs give vector observations; use mlp (algo=r2d2_vector)")
    if c.env.kind == "atari" and c.algo.network.torso == "mlp":
        problems.append("algo.network.torso=mlp: Atari gives image observations; use nature_cnn")
    length, overlap = unroll_layout(c.algo.burn_in, c.algo.seq_len, c.algo.overlap)
    steps_per_actor = c.workload.frames // (c.env.frameskip * c.actors)
    if c.workload.learner_updates is None and c.algo.samples_per_insert <= 0:
        problems.append("workload.learner_updates=None: it follows from the replay ratio, but "
                        "algo.samples_per_insert=0 (unthrottled); allowed: set workload.learner_updates")
    trains = c.learner and c.policy == "r2d2" and c.workload.learner_updates != 0
    if trains and sequences_per_actor(steps_per_actor, length, overlap) < 1:
        need = length * c.env.frameskip * c.actors
        problems.append(
            f"workload.frames={c.workload.frames}: too few for {c.actors} actors to fill one "
            f"sequence of {length} steps each; allowed: >= {need} (or fewer actors)"
        )
    return problems


def _search_checks(c: Config) -> list[str]:
    """search.objectives name final metrics of the contract (rlbench/metrics.py)."""
    import difflib

    from rlbench.metrics import final_metrics

    if c.search is None:
        return []
    known = final_metrics()
    problems = []
    for name in c.search.objectives:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=2)
            hint = f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""
            problems.append(f"search.objectives={list(c.search.objectives)}: {name!r} is no final metric; {hint}"
                            f"allowed: a job's final metrics (docs/metrics.md), e.g. fps, runtime_s, energy_per_task_j")
    return problems


def _env_checks(c: Config) -> list[str]:
    """The env can be made (any ALE ROM; any gymnasium id, `module:Env-v0` included)."""
    from rlbench.envs.spec import check_env

    reason = check_env(c.env)  # "env.id=<id>: <why>, <what is allowed>"
    return [reason] if reason else []


def _replay_memory_checks(c: Config) -> list[str]:
    """Replay must fit in the memory this host has free now (it is allocated up front)."""
    import psutil

    from rlbench.envs.spec import env_spec

    if not (c.learner and c.policy == "r2d2"):
        return []
    spec = env_spec(c.env)
    per_seq = sequence_bytes(c, spec)
    capacity = replay_capacity(c, per_seq)
    free = psutil.virtual_memory().available
    key = (f"algo.replay_memory_gb={c.algo.replay_memory_gb}" if c.algo.replay_memory_gb is not None
           else f"algo.replay_capacity={c.algo.replay_capacity}")
    if capacity < 1:
        return [f"{key}: holds no sequence of {per_seq / 1e6:.3f} MB; allowed: at least one sequence"]
    if capacity * per_seq > free:
        return [(f"{key}: replay needs {capacity * per_seq / 1e9:.2f} GB ({capacity} sequences x "
                 f"{per_seq / 1e6:.3f} MB) but this host has {free / 1e9:.2f} GB free; allowed: at most "
                 f"{free // per_seq} sequences (or a smaller algo.replay_memory_gb)")]
    if c.algo.min_replay > capacity:
        return [f"algo.min_replay={c.algo.min_replay}: allowed: at most the replay capacity ({capacity} sequences)"]
    return []


def _host_checks(c: Config) -> list[str]:
    """Limits this host cannot honour (sm_limit above its SMs or CPU threads, MPS without daemon)."""
    from rlbench.resources import ComputeLimit, ResourceError
    from rlbench.trainer import resolve_device

    try:
        ComputeLimit(c.sm_limit, resolve_device(c.device), c.sm_backend)
    except ResourceError as e:
        return [str(e)]
    return []


def validate(cfg: DictConfig) -> Config:
    """Typed, range-checked config; raises ConfigError naming every bad key and value."""
    try:
        plain = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
        conf: Config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(Config), plain))
    except Exception as e:  # omegaconf's ValidationError / MissingMandatoryValue
        raise ConfigError(str(e)) from e
    problems = [
        f"{key}={_get(conf, key)!r}: allowed: {allowed}"
        for key, (ok, allowed) in _rules(conf).items()
        if not ok(_get(conf, key))
    ]
    if not problems:
        problems = _cross_checks(conf) + _search_checks(conf) + _env_checks(conf) + _host_checks(conf)
    if not problems:
        problems = _replay_memory_checks(conf)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    conf.workload.learner_updates = task_learner_updates(conf)  # resolved: every consumer sees the number
    return conf
