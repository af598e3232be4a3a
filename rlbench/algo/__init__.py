"""The algorithms rlbench measures, one package each, and the registry that finds them by name.

`config_module(name)` loads a package's torch-free config.py with every declaration in
DECLARED, `algorithm(name)` its build.py; `register` or RLBENCH_ALGORITHMS add a package from
outside rlbench. What a package declares and why: docs/algorithms.md.
"""

from __future__ import annotations

import os
from types import ModuleType

from rlbench.metrics import declare_algorithm
from rlbench.registry import RegistryError, from_env, import_module, missing

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
                             f"every algorithm declares {', '.join(DECLARED)} (rlbench/algo/__init__.py)")
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
    (a record of an algorithm this install lacks, or one registered only elsewhere)."""
    return bool(config_module(name).ON_POLICY) if name in ALGORITHMS else None


def preset(name: str, observation: str | None) -> str:
    """The conf/algo preset that runs algorithm `name` on envs giving `observation`s ("image",
    "vector": an env family's OBSERVATION; e.g. r2d2_vector for vectors)."""
    return config_module(name).PRESETS.get(observation, name) if name in ALGORITHMS else name
