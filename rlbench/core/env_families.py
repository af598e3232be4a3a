"""The env families rlbench steps, one package each, and the registry that finds them.

`env.kind=<name>` (conf/env/<preset>.yaml extends the family's schema, `schema/env/<name>`)
chooses the family: its config fields and their rules, what an env.id gives the agent, the
actors' vector env, how many CPU threads step it and whether it serves partial batches. The
rest of rlbench (validate, the trainer, the job, tracking, predict, the algorithms' torso
check) asks the family through the declarations below, never by its name or its config keys.

What a family's `family.py` declares (DECLARED; importing it loads no emulator):
  `Schema` (the dataclass behind `env.*`: rlbench.config.schema.EnvConfig's kind, id and
  frameskip, plus the family's own fields; registered as `schema/env/<name>`),
  `OBSERVATION` ("image": uint8 frames stacked along axis 0, the nature_cnn torso; "vector":
  float32 1-D observations, the mlp torso; an algorithm's PRESETS are keyed by it),
  `PARTIAL_BATCHES` (whether its vector env returns the first k ready envs, inference_batch
  k < envs; False: every recv() returns all envs, lock-step),
  `PACKAGE` (the distribution that steps it: its version enters the MLflow dataset's digest),
  `rules(env)` -> {"env.<field>": (ok(value), what is allowed)} for its own fields,
  `spec(env)` -> rlbench.envs.spec.EnvSpec without starting a vector env, or raises EnvIdError
  with a one-line reason the id cannot run,
  `make(env, num_envs, threads, batch, affinity_offset)` -> a rlbench.envs.vector.VectorEnv
  (`batch`: the config's inference_batch, -1 auto, 0 lock-step, k),
  `hardware_threads(actor_threads, cores)` -> the CPU threads its envs step on, given the
  config's actor_threads (None: all) and the cores there are,
  `source_url(env)` -> the env's documentation page (the dataset's source),
  `overrides(env_id)` -> the command-line overrides that compose env_id under this family
  (predict's suggested profile command).

The built-in families are rlbench/envs/<name>/. Another one lives anywhere importable: add it
with `register(name, "its.package")` (and rlbench.config.schema.register_configs(), which
also makes `env=<name>` select its Schema's defaults), or, for every rlbench process started
from a shell, with RLBENCH_ENV_FAMILIES="name=its.package[,...]". A family missing a
declaration is refused with the names it lacks.
"""

from __future__ import annotations

import os
from types import ModuleType

from rlbench.core.registry import RegistryError, from_env, import_module, missing

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
                             f"every env family declares {', '.join(DECLARED)} (rlbench/core/env_families.py)")
    if module.OBSERVATION not in OBSERVATIONS:
        raise EnvFamilyError(f"env family {name!r} ({package}.family): OBSERVATION={module.OBSERVATION!r}; "
                             f"allowed: one of {', '.join(OBSERVATIONS)}")
    return module
