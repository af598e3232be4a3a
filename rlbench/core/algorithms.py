"""The algorithms rlbench measures, one package each, and the registry that finds them.

Choosing `algo=<name>` (conf/algo/<preset>.yaml, whose `name` is the algorithm) chooses the
network, what central inference does with its output, what an unroll carries, the buffer
between inference and the learner, the learner and the config schema with its rules. The
generic roles (actors, central inference, the runner, telemetry, tracking), predict and the
report know none of it: they ask the package through the declarations below, never by its name
or its config keys. docs/algorithms.md tells the longer story.

What a package's torch-free `config.py` declares (DECLARED; a bad command line is refused
before torch loads):
  `Schema` (the dataclass behind `algo.*`; registered as `schema/algo/<name>`),
  `LEARNS` (whether it trains a network: evaluation envs run only then),
  `ON_POLICY` (whether its learner trains only on data of its current policy: the report's
  on- vs off-policy verdict),
  `OPS` ({role: operations it times}, within rlbench.core.metrics.OPS: the shared names),
  `METRICS` (rlbench.core.metrics.Metric of each metric only it logs, e.g. R2D2's replay_size; the
  shared ones, loss, queue_size, unrolls..., are rlbench/core/metrics.py's; a clash is refused),
  `PRESETS` ({observation: the conf/algo preset for it}, where not `algo=<name>`; observation
  as an env family declares it, "image" or "vector": rlbench/core/env_families.py),
  `rules(conf)` -> {dotted key: (ok(value), what is allowed)},
  `checks(conf)` -> problems across keys ("<key>=<value>: ..."), `host_checks(conf)` against this host,
  `task_learner_updates(conf)` -> the updates a task needs when the workload leaves them null,
  `task_replay_ratio(conf)` -> samples per unroll the task implies (None: no learner),
  `learner_data(conf)` -> rlbench.algo.common.data.LearnerData, what the learner takes of the actors'
  stream (predict's model), or None without a learner,
  `profile_overrides(conf)` -> {algo key: value} that timing the learner alone needs (rlbench.profile).
Its `build.py`: `build(ctx: AlgoContext) -> AlgoParts` (rlbench/roles/contract.py).
(`<name>/__init__.py` stays empty of imports, so that importing config.py loads no torch.)

The built-in packages are rlbench/algo/<name>/. Another one lives anywhere importable: add it
with `register(name, "its.package")`, or, for every rlbench process started from a shell
(the CLI, a sweep's jobs, the report, predict), with RLBENCH_ALGORITHMS="name=its.package[,...]".
A package missing a declaration is refused with the names it lacks.
"""

from __future__ import annotations

import os
from types import ModuleType

from rlbench.core.metrics import declare_algorithm
from rlbench.core.registry import RegistryError, from_env, import_module, missing

BUILT_IN = {"r2d2": "rlbench.algo.r2d2", "vtrace": "rlbench.algo.vtrace", "random": "rlbench.algo.random"}
ENV_VAR = "RLBENCH_ALGORITHMS"
DECLARED = ("Schema", "LEARNS", "ON_POLICY", "OPS", "METRICS", "PRESETS", "rules", "checks", "host_checks",
            "task_learner_updates", "task_replay_ratio", "learner_data", "profile_overrides")


class AlgorithmError(RegistryError):
    """An algorithm rlbench does not know, or whose package lacks a declaration."""


# name -> package; a dict, so that `name in ALGORITHMS` and iterating it see registrations
ALGORITHMS: dict[str, str] = {**BUILT_IN, **from_env(ENV_VAR, os.environ.get(ENV_VAR, ""), AlgorithmError)}


def register(name: str, package: str) -> None:
    """Make `algo.name=<name>` mean the algorithm package `package` (checked on first use)."""
    if name in BUILT_IN and BUILT_IN[name] != package:
        raise AlgorithmError(f"algorithm {name!r} is built in ({BUILT_IN[name]}); choose another name")
    ALGORITHMS[name] = package


def unregister(name: str) -> None:
    """Forget an algorithm added with register() (tests); the built-in ones stay."""
    if name not in BUILT_IN:
        ALGORITHMS.pop(name, None)


def _package(name: str) -> str:
    if name not in ALGORITHMS:
        raise AlgorithmError(f"algo.name={name!r}: no such algorithm; known: {', '.join(ALGORITHMS)} "
                             f"(a package in rlbench/algo/, or one added with register() or {ENV_VAR})")
    return ALGORITHMS[name]


def _import(name: str, module: str) -> ModuleType:
    return import_module(f"algorithm {name!r}", module, ALGORITHMS[name], AlgorithmError)


def config_module(name: str) -> ModuleType:
    """The torch-free config module of algorithm `name`, with every declaration of DECLARED."""
    package = _package(name)
    module = _import(name, f"{package}.config")
    lacks = missing(module, DECLARED)
    if lacks:
        raise AlgorithmError(f"algorithm {name!r} ({package}.config) does not declare {', '.join(lacks)}; "
                             f"every algorithm declares {', '.join(DECLARED)} (rlbench/core/algorithms.py)")
    try:
        declare_algorithm(name, module.METRICS)
    except ValueError as e:
        raise AlgorithmError(f"{e} ({package}.config METRICS)") from None
    return module


def algorithm(name: str) -> ModuleType:
    """The algorithm's build module (imports torch): its `build(ctx)`."""
    package = _package(name)
    module = _import(name, f"{package}.build")
    if not hasattr(module, "build"):
        raise AlgorithmError(f"algorithm {name!r} ({package}.build) does not declare build(ctx)")
    return module


def on_policy(name: str) -> bool | None:
    """Whether algorithm `name` learns on-policy; None for a name this process does not know
    (a record of an algorithm no longer here, or registered only elsewhere)."""
    return bool(config_module(name).ON_POLICY) if name in ALGORITHMS else None


def preset(name: str, observation: str | None) -> str:
    """The conf/algo preset that runs algorithm `name` on envs giving `observation`s ("image",
    "vector": an env family's OBSERVATION; e.g. r2d2_vector for vectors)."""
    return config_module(name).PRESETS.get(observation, name) if name in ALGORITHMS else name
