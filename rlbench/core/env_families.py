"""The env families rlbench steps, one package each, found by name (`env.kind`): the registry
and `EnvFamily`, the contract of a package's `family.py` (importing it loads no emulator).
docs/envs.md says what each part means."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol

from rlbench.core.registry import Registry, RegistryError

BUILT_IN = {"atari": "rlbench.envs.atari", "gym": "rlbench.envs.gym"}
ENV_VAR = "RLBENCH_ENV_FAMILIES"
OBSERVATIONS = ("image", "vector")  # the torsos rlbench has: nature_cnn, mlp


class EnvFamily(Protocol):
    """What an env family's `family.py` declares (docs/envs.md, "The contract")."""

    Schema: type  # the dataclass behind `env.*` (extends rlbench.config.schema.EnvConfig)
    OBSERVATION: str  # one of OBSERVATIONS: "image" (stacked uint8 frames) or "vector" (float32)
    PARTIAL_BATCHES: bool  # whether its vector env returns the first k ready envs
    PACKAGE: str  # the distribution that steps it (its version enters the dataset's digest)

    def rules(self, env: Any) -> dict: ...
    def spec(self, env: Any) -> Any: ...  # rlbench.envs.spec.EnvSpec, or raises EnvIdError
    def make(
        self, env: Any, num_envs: int, threads: int, batch: int, affinity_offset: int = -1, seed: int = 0
    ) -> Any: ...
    def hardware_threads(self, actor_threads: int | None, cores: int) -> int: ...
    def source_url(self, env: Any) -> str: ...
    def overrides(self, env_id: str) -> str: ...


class EnvFamilyError(RegistryError):
    """An env family rlbench does not know, or whose package lacks part of the contract."""


def _observation(name: str, module: ModuleType) -> list[str]:
    if getattr(module, "OBSERVATION", OBSERVATIONS[0]) not in OBSERVATIONS:
        raise EnvFamilyError(
            f"env family {name!r} ({module.__name__}): OBSERVATION={module.OBSERVATION!r}; "
            f"allowed: one of {', '.join(OBSERVATIONS)}"
        )
    return []


FAMILIES: Registry[ModuleType] = Registry(
    "env family",
    "env.kind",
    EnvFamily,
    BUILT_IN,
    ENV_VAR,
    EnvFamilyError,
    resolve=lambda package: f"{package}.family",
    check=_observation,
)
DECLARED = FAMILIES.declared


def family(name: str) -> ModuleType:
    """The declarations (`<package>.family`) of env family `name`."""
    return FAMILIES.get(name)


def without_added_fields(env: dict) -> dict:
    """`env`'s settings without the fields its family added after records existed
    (`ADDED_FIELDS`, optional) where they hold the value those records ran: config_hash and the
    dataset's digest of such a job stay what they were before the field."""
    try:
        added = getattr(family(env.get("kind")), "ADDED_FIELDS", {})
    except EnvFamilyError:
        return env
    return {k: v for k, v in env.items() if k not in added or added[k] != v}
