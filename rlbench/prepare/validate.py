"""Range checks that types cannot express, run before any work starts.

`validate(cfg)` turns the composed DictConfig into the typed `Config` (OmegaConf.to_object)
and checks every rule below; all violations are reported together, each as
`<key>=<value>: <what is allowed>` (docs/jobs.md, "Refused early").
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from functools import cache
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlbench.config.rules import ConfigError, Rules, int_at_least, one_of, optional_in
from rlbench.config.schema import Config
from rlbench.core import hot_path
from rlbench.core.address import TOKEN_ENV, is_local
from rlbench.core.algorithms import ALGORITHMS, config_module
from rlbench.core.env_families import FAMILIES, family
from rlbench.core.metrics import final_metric_names
from rlbench.core.precision import PRECISIONS
from rlbench.core.resources import resolve_device, usable_cpus
from rlbench.core.verdict import COMPARED
from rlbench.envs.spec import check_env
from rlbench.envs.vector import resolve_inference_batch
from rlbench.prepare.host_checks import host_checks
from rlbench.prepare.packing import pack_checks
from rlbench.prepare.plan import eval_envs_of

HEARTBEAT_S = 10.0  # a job's run is tagged `heartbeat` at most this often (rlbench/tracking/record.py)


def _rules(conf: Config, host: bool = True) -> Rules:
    """The generic keys' rules (search.* when search is selected); the env family's and the
    algorithm's own come from their packages. host=False: actor_threads is not bounded by this
    host's CPUs."""
    envs = conf.actors + conf.eval_envs  # env i is reset with seed + i, an int32 in ALE
    beat = max(HEARTBEAT_S, conf.tracking.log_every_s)
    return {
        "actors": int_at_least(1),
        "repeats": ((lambda v: v >= 1), "an integer >= 1 (runs of each configuration in a sweep, -m)"),
        "pack": ((lambda v: v >= 1), "an integer >= 1 (jobs run at once on this host, each on its own CPUs)"),
        "packing.index": ((lambda v: 0 <= v < conf.pack), f"0..pack-1 = 0..{conf.pack - 1} (set by the sweep)"),
        "actor_threads": optional_in(1, len(usable_cpus())) if host else optional_in(1, 1 << 16),
        "sm_limit": ((lambda v: v is None or v >= 1), "null (all) or an integer >= 1"),
        "inference_batch": _inference_batch_rule(conf),
        "device": ((lambda v: re.fullmatch(r"auto|cpu|cuda(:\d+)?", v) is not None), "auto, cpu, cuda or cuda:<index>"),
        "sm_backend": one_of("green_context", "mps"),
        "precision": one_of(*PRECISIONS),
        "progress": one_of("auto", "bar", "log"),
        "env.frameskip": int_at_least(1),
        "workload.frames": int_at_least(1),
        "workload.learner_updates": (
            (lambda v: v is None or v >= 0),
            "null (follows from the frames and the algorithm, e.g. R2D2's replay ratio) or an integer >= 0",
        ),
        "eval_envs": int_at_least(0),
        "actor_procs": (
            (lambda v: v >= 0),
            "0 (the envs step in the job's process) or a number of local actor processes",
        ),
        "actor_hosts": ((lambda v: v >= 0), "0 (no actor tasks on other nodes) or a number of actor hosts"),
        "actor_launch.cpus_per_task": int_at_least(1),
        "actor_launch.mem_gb": int_at_least(1),
        "actor_launch.timeout_min": int_at_least(1),
        "actor_server.remote_envs": ((lambda v: v >= 0), "an integer >= 0 (envs from actor processes started by hand)"),
        "actor_server.join_timeout_s": ((lambda v: v > 0), "seconds > 0"),
        "actor_server.idle_timeout_s": ((lambda v: v > 0), "seconds > 0"),
        "eval_epsilon": ((lambda v: 0.0 <= v <= 1.0), "a probability in [0, 1]"),
        "workload.max_runtime_s": ((lambda v: v >= 0), "seconds >= 0 (0 = no limit)"),
        "tracking.experiment": ((lambda v: bool(v.strip())), "a non-empty MLflow experiment name"),
        "tracking.uri": (
            _tracking_uri,
            (
                "an MLflow tracking URI (not empty; check MLFLOW_TRACKING_URI): sqlite:///path.db, "
                "http(s)://host:port, postgresql://...; a folder is MLflow's file store, which MLflow 3 "
                "keeps in maintenance mode and refuses"
            ),
        ),
        "telemetry.rate_hz": ((lambda v: 0 < v <= 1000), "a rate in (0, 1000] Hz"),
        "telemetry.cpu_tdp_w": ((lambda v: v is None or v > 0), "null (no estimate) or watts > 0"),
        "telemetry.trace_window_s": ((lambda v: 0 <= v <= 3600), "seconds in [0, 3600] (0 = no trace.json)"),
        "seed": (
            (lambda v: 0 <= v <= 2**31 - envs),
            f"an integer in [0, 2**31 - actors - eval_envs = {2**31 - envs}] (env i is seeded seed + i, an int32)",
        ),
        "tracking.log_every_s": (
            (lambda v: v >= 1),
            "seconds >= 1 (a series' step is whole seconds since the task started: one tick each)",
        ),
        "tracking.steady_min_windows": (
            (lambda v: v >= 1),
            (
                "an integer >= 1 (the fewest tick windows after the warm-up and before a "
                "role is done that the steady/* rates are the median of)"
            ),
        ),
        "tracking.ui_port": ((lambda v: 1 <= v <= 65535), "a TCP port in [1, 65535] (mlflow ui --port)"),
        **VERDICT_RULES,
        "tracking.stale_after_s": (
            (lambda v: v > beat),
            (
                f"seconds > the heartbeat period max({HEARTBEAT_S:g}, tracking.log_every_s) = "
                f"{beat:g} (else running jobs are marked FAILED)"
            ),
        ),
    } | (_search_rules() if conf.search is not None else {})


def _hot_path_rules(c: Config, host: bool) -> Rules:
    """hot_path.<role>: a mode the job's device offers (rlbench/core/hot_path.py). Only a
    non-eager value asks which device that is (auto: torch's CUDA; without host, any device).
    hot_path.memory_format: one of its layouts, on any device."""
    formats = hot_path.MEMORY_FORMATS
    layout = {"hot_path.memory_format": (formats.__contains__, f"one of {', '.join(formats)}")}
    if all(getattr(c.hot_path, role) == hot_path.EAGER for role in hot_path.MODES):
        return layout
    if not host and c.device == "auto":
        device = "any"
    else:
        device = (
            "cuda" if c.device.startswith("cuda") else "cpu" if c.device == "cpu" else resolve_device(c.device).type
        )
    return layout | {
        f"hot_path.{role}": (offered.__contains__, hot_path.allowed(role, device))
        for role, offered in ((r, hot_path.offered(r, device)) for r in hot_path.MODES)
    }


def _compared(metric: str) -> bool:
    """A metric the verdict can compare: a final value of the contract with a known better
    direction (rlbench/core/verdict.py COMPARED); steady/fps is absent from a job with too few
    steady windows, which the comparison leaves out."""
    return metric in COMPARED and metric in final_metric_names()


VERDICT_RULES = {  # the sweep's settings, also checked once per sweep before any job: rlbench/prepare/grid.py
    "verdict.metric": (
        _compared,
        "a final metric whose better direction is known: "
        + ", ".join(m for m in COMPARED if m in final_metric_names()),
    ),
    "verdict.noise_floor_min": (
        (lambda v: 0.0 <= v < 1.0),
        "a fraction in [0, 1) (0.05: differences of 5% or less are never told apart)",
    ),
    "sweep.idle_power_s": ((lambda v: 0.0 <= v <= 600.0), "seconds in [0, 600] (0 = not measured)"),
    "sweep.warmup": ((lambda v: isinstance(v, bool)), "true or false"),
}


def _inference_batch_rule(conf: Config):
    """-1 (auto), 0 (lock-step) or k in [1, envs - 1], envs as the job steps them (eval envs
    only when the algorithm learns); rlbench/envs/vector.py resolve_inference_batch."""
    n = conf.actors + eval_envs_of(conf)
    if n < 1:  # no envs: `actors` is refused by its own rule; nothing to say about a batch of none
        return (
            lambda v: v >= -1
        ), "-1 (auto), 0 (lock-step) or an integer in [1, envs - 1] (envs = actors + eval envs)"
    envs = f"envs = actors {conf.actors} + eval envs {n - conf.actors}"
    auto = (
        f"-1 (SEED RL's auto: envs // 2 = {resolve_inference_batch(-1, n)} per forward, at least 1; "
        f"lock-step when that is all envs), 0 (lock-step: every forward waits for all {n} envs)"
    )
    first_k = f" or an integer in [1, {n - 1}] (the first k envs ready)" if n > 1 else " (one env: no other value)"
    lock = (
        ""
        if family(conf.env.kind).PARTIAL_BATCHES
        or conf.actor_procs
        or conf.actor_hosts
        or conf.actor_server.remote_envs
        else f"; {conf.env.kind} envs always step in lock-step in the job's process (actor_procs=0), whatever the value"
    )
    return (lambda v: v == -1 or 0 <= v < n), f"{auto}{first_k}; {envs}{lock}"


def _database_url(v: str) -> bool:
    """A URL with a scheme and something after it (sqlite:///x.db, postgresql://...): no folder, no empty value."""
    scheme, sep, rest = v.partition("://")
    return bool(sep and scheme.strip() and rest.strip() and scheme != "file")


def _tracking_uri(v: str) -> bool:
    return bool(v and v.strip()) and (_database_url(v) or v.startswith("databricks"))


def _search_rules() -> Rules:
    return {
        "search.study": (
            (lambda v: bool(v.strip())),
            "a non-empty Optuna study name (the study's parent run is found by it)",
        ),
        "search.storage": (
            _database_url,
            (
                "a database URL for the study (sqlite:///mlruns/optuna.db, or "
                "postgresql://user:pw@host/db for many workers)"
            ),
        ),
        "search.n_trials": int_at_least(1),
        "search.seed": (
            (lambda v: 0 <= v <= 2**31 - 1),
            "an integer in [0, 2**31 - 1] (numpy seeds are < 2**32; each trial adds its number)",
        ),
        "search.retries": ((lambda v: v >= 0), "an integer >= 0 (0 = no reruns)"),
        "search.heartbeat_s": int_at_least(1),
        "search.max_failures": int_at_least(1),
        "search.workers": int_at_least(1),
        "search.repeats": ((lambda v: v >= 1), "an integer >= 1 (runs of each trial's configuration)"),
        "search.pruner_startup_trials": ((lambda v: v >= 0), "an integer >= 0 (0 = prune from the first trial)"),
    }


def _get(conf: Config, dotted: str) -> Any:
    obj: Any = conf
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _search_checks(conf: Config) -> list[str]:
    """search.objectives name final metrics of the contract (rlbench/core/metrics.py)."""

    if conf.search is None:
        return []
    known = final_metric_names(conf.algo.name)  # the shared ones and this algorithm's
    problems = []
    for name in conf.search.objectives:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=2)
            hint = f"did you mean {' or '.join(repr(n) for n in close)}? " if close else ""
            problems.append(
                f"search.objectives={list(conf.search.objectives)}: {name!r} is no final metric; {hint}"
                f"allowed: a job's final metrics (docs/metrics.md), e.g. fps, runtime_s, energy_per_task_j"
            )
    top = conf.search.n_trials if conf.search.warm_start_profile else None  # more than n_trials: only with a warm start
    if conf.search.warm_start_trials < 1 or (top is not None and conf.search.warm_start_trials > top):
        allowed = f"[1, search.n_trials={top}]" if top is not None else ">= 1"
        problems.append(f"search.warm_start_trials={conf.search.warm_start_trials}: allowed: an integer {allowed}")
    return problems


def _env_checks(conf: Config) -> list[str]:
    """The env can be made (its family's probe: any ALE ROM; any gymnasium id, `module:Env-v0` included)."""

    reason = check_env(conf.env)  # "env.id=<id>: <why>, <what is allowed>"
    return [reason] if reason else []


def _actor_checks(conf: Config) -> list[str]:
    """Actor processes and tasks: every local process and every actor task gets an env, remote
    envs need an address other hosts reach, and a non-loopback address needs its token
    (rlbench/remote/; a job with actor tasks makes one for them, not for hand-started actors)."""

    total, server = conf.actors + eval_envs_of(conf), conf.actor_server
    local, placed = total - server.remote_envs, conf.actor_procs + conf.actor_hosts  # placed: processes the job starts
    if local < 0 or (placed and local < placed):
        return [
            (
                f"actor_procs={conf.actor_procs} actor_hosts={conf.actor_hosts} "
                f"actor_server.remote_envs={server.remote_envs}: "
                f"the job steps {total} envs (actors + eval envs); allowed: remote_envs <= {total}, and at least one "
                f"env per actor process and actor task (actor_procs + actor_hosts <= {max(local, 0)})"
            )
        ]
    if local > 0 and server.remote_envs and not placed:
        return [
            (
                f"actor_server.remote_envs={server.remote_envs}: {local} of the {total} envs would have "
                f"no actor process; "
                f"allowed: remote_envs = {total} (all remote), or actor_procs or actor_hosts >= 1 for the other {local}"
            )
        ]
    if server.remote_envs and server.bind is None:
        return [
            (
                f"actor_server.remote_envs={server.remote_envs} with actor_server.bind=null (a unix "
                f"socket of this host): "
                f"allowed: actor_server.bind=HOST:PORT that the other hosts reach"
            )
        ]
    made = conf.actor_hosts and not server.remote_envs  # the job makes a token its tasks inherit
    if server.bind is not None and not is_local(server.bind) and not os.environ.get(TOKEN_ENV) and not made:
        return [
            (
                f"actor_server.bind={server.bind}: a non-loopback address needs a token in the environment variable "
                f"{TOKEN_ENV} (the actors send the same); allowed without one: 127.0.0.1:PORT, "
                f"localhost:PORT, unix:PATH"
            )
        ]
    return []


def _non_finite(conf: Any, rules: Rules, prefix: str = "") -> dict[str, str]:
    """Every float of the typed config that is nan or inf, with what is allowed: `inf` passes a
    `v > 0` rule and `nan` fails every comparison silently, so no float may be non-finite."""

    found: dict[str, str] = {}
    for f in dataclasses.fields(conf):
        key, value = f"{prefix}{f.name}", getattr(conf, f.name)
        if dataclasses.is_dataclass(value):
            found |= _non_finite(value, rules, f"{key}.")
        elif isinstance(value, float) and not math.isfinite(value):
            rule = rules.get(key, (None, "a number"))[1]
            found[key] = f"{key}={value!r}: allowed: {rule} (finite: not nan or inf)"
        elif isinstance(value, list) and any(isinstance(v, float) and not math.isfinite(v) for v in value):
            found[key] = f"{key}={value!r}: allowed: finite numbers (not nan or inf)"
    return found


@cache
def _schema(cls) -> DictConfig:
    """The structured config of a schema dataclass, built once per process: OmegaConf.merge
    copies its first config, so the one built here is never changed (building one takes ~60 ms,
    copying it ~1 ms; every command and test validates)."""
    return OmegaConf.structured(cls)


def _typed(cfg: DictConfig) -> Config:
    """The typed Config; `algo` typed by the schema of the algorithm its `name` picks, `env` by
    the schema of the env family its `kind` picks."""
    plain = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]) if "hydra" in cfg else cfg
    name = OmegaConf.select(plain, "algo.name", default=None)
    if name not in ALGORITHMS:
        raise ConfigError(
            f"invalid config:\n  algo.name={name!r}: allowed: one of {', '.join(ALGORITHMS)} "
            f"(a package in rlbench/algo/; presets in conf/algo/)"
        )
    kind = OmegaConf.select(plain, "env.kind", default=None)
    if kind not in FAMILIES:
        raise ConfigError(
            f"invalid config:\n  env.kind={kind!r}: allowed: one of {', '.join(FAMILIES)} "
            f"(a package in rlbench/envs/; presets in conf/env/)"
        )
    try:
        typed = OmegaConf.merge(_schema(Config), plain)
        typed.algo = OmegaConf.merge(_schema(config_module(name).Schema), plain.algo)
        typed.env = OmegaConf.merge(_schema(family(kind).Schema), plain.env)
        return OmegaConf.to_object(typed)
    except Exception as e:  # omegaconf's ValidationError / MissingMandatoryValue
        raise ConfigError(str(e)) from e


def validate(cfg: DictConfig, host: bool = True) -> Config:
    """Typed, range-checked config; raises ConfigError naming every bad key and value.
    host=False leaves out what only this host limits (its CPU threads, devices, free memory):
    for predictions about another machine (rlbench.predict)."""
    conf = _typed(cfg)
    algo = config_module(conf.algo.name)
    rules = _rules(conf, host) | _hot_path_rules(conf, host) | family(conf.env.kind).rules(conf.env) | algo.rules(conf)
    non_finite = _non_finite(conf, rules)
    problems = list(non_finite.values()) + [
        f"{key}={_get(conf, key)!r}: allowed: {allowed}"
        for key, (ok, allowed) in rules.items()
        if key not in non_finite and not ok(_get(conf, key))
    ]
    if not problems:  # an env that cannot be made first: the later checks read its spec
        problems = _env_checks(conf)
    if not problems:
        problems = algo.checks(conf) + _search_checks(conf) + _actor_checks(conf) + pack_checks(conf)
        problems += host_checks(conf) if host else []
    if not problems and host:
        problems = algo.host_checks(conf)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    if conf.workload.learner_updates is None:  # resolved: every consumer sees the number
        resolve_learner_updates(conf)
    return conf


def resolve_learner_updates(conf: Config) -> Config:
    """workload.learner_updates as the task's frames and the algorithm decide it (0 without a learner)."""
    algo = config_module(conf.algo.name)
    conf.workload.learner_updates = algo.task_learner_updates(conf) if algo.LEARNS and conf.learner else 0
    return conf
