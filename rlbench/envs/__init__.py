"""The env families rlbench steps, one package each, and the registry that finds them by kind.

`family(kind)` loads a family's family.py with every declaration in DECLARED (it imports no
emulator); `register` or RLBENCH_ENV_FAMILIES add a package from outside rlbench. What a
family declares and why: docs/envs.md.
"""

from __future__ import annotations

import os
from types import ModuleType

from rlbench.registry import RegistryError, from_env, import_module, missing

BUILT_IN = {"atari": "rlbench.envs.atari", "gym": "rlbench.envs.gym"}
ENV_VAR = "RLBENCH_ENV_FAMILIES"
DECLARED = ("Schema", "OBSERVATION", "PARTIAL_BATCHES", "PACKAGE", "rules", "spec", "make", "hardware_threads",
            "source_url", "overrides")
OBSERVATIONS = ("image", "vector")  # the torsos rlbench has: nature_cnn, mlp


class EnvFamilyError(RegistryError):
    """An env family rlbench does not know, or whose package lacks a declaration."""


# name -> package; a dict, so that `name in FAMILIES` and iterating it see registrations
FAMILIES: dict[str, str] = {**BUILT_IN, **from_env(ENV_VAR, os.environ.get(ENV_VAR, ""), EnvFamilyError)}


def register(name: str, package: str) -> None:
    """Make `env.kind=<name>` mean the env family package `package` (checked on first use)."""
    if name in BUILT_IN and BUILT_IN[name] != package:
        raise EnvFamilyError(f"env family {name!r} is built in ({BUILT_IN[name]}); choose another name")
    FAMILIES[name] = package


def unregister(name: str) -> None:
    """Forget a family added with register() (tests); the built-in ones stay."""
    if name not in BUILT_IN:
        FAMILIES.pop(name, None)


def family(name: str) -> ModuleType:
    """The declarations module (`<package>.family`) of env family `name`, with all of DECLARED."""
    if name not in FAMILIES:
        raise EnvFamilyError(f"env.kind={name!r}: no such env family; known: {', '.join(FAMILIES)} "
                             f"(a package in rlbench/envs/, or one added with register() or {ENV_VAR})")
    package = FAMILIES[name]
    module = import_module(f"env family {name!r}", f"{package}.family", package, EnvFamilyError)
    lacks = missing(module, DECLARED)
    if lacks:
        raise EnvFamilyError(f"env family {name!r} ({package}.family) does not declare {', '.join(lacks)}; "
                             f"every env family declares {', '.join(DECLARED)} (rlbench/envs/__init__.py)")
    if module.OBSERVATION not in OBSERVATIONS:
        raise EnvFamilyError(f"env family {name!r} ({package}.family): OBSERVATION={module.OBSERVATION!r}; "
                             f"allowed: one of {', '.join(OBSERVATIONS)}")
    return module
