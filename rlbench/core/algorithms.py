"""The algorithms rlbench measures, one package each, found by name (`algo.name`): the
registry and `AlgorithmPlugin`, the contract of a package's torch-free `config.py` (its
`build.py` gives `build(ctx) -> AlgoParts`). docs/algorithms.md says what each part means."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from rlbench.core.metrics import declare_algorithm
from rlbench.core.registry import Registry, RegistryError, load_target

BUILT_IN = {"r2d2": "rlbench.algo.r2d2", "vtrace": "rlbench.algo.vtrace", "random": "rlbench.algo.random"}
ENV_VAR = "RLBENCH_ALGORITHMS"


class AlgorithmPlugin(Protocol):
    """What an algorithm package's `config.py` declares (docs/algorithms.md, "The contract")."""

    Schema: type  # the dataclass behind `algo.*`, registered as schema/algo/<name>
    LEARNS: bool  # whether it trains a network (evaluation envs run only then)
    ON_POLICY: bool  # whether its learner trains only on data of its current policy
    OPS: dict[str, tuple[str, ...]]  # {role: the operations it times}, within rlbench.core.metrics.OPS
    METRICS: tuple  # rlbench.core.metrics.Metric of each metric only it logs
    PRESETS: dict[str, str]  # {observation: the conf/algo preset for it}, where not algo=<name>

    def rules(self, conf: Any) -> dict[str, tuple[Callable[[Any], bool], str]]: ...
    def checks(self, conf: Any) -> list[str]: ...
    def host_checks(self, conf: Any) -> list[str]: ...
    def task_learner_updates(self, conf: Any) -> int: ...
    def task_replay_ratio(self, conf: Any) -> float | None: ...
    def learner_data(self, conf: Any) -> Any: ...
    def profile_overrides(self, conf: Any) -> dict[str, Any]: ...


class AlgorithmError(RegistryError):
    """An algorithm rlbench does not know, or whose package lacks part of the contract."""


def _declare_metrics(name: str, module: ModuleType) -> list[str]:
    try:
        declare_algorithm(name, module.METRICS)
    except ValueError as e:
        raise AlgorithmError(f"{e} ({module.__name__} METRICS)") from None
    return []


ALGORITHMS: Registry[ModuleType] = Registry(
    "algorithm",
    "algo.name",
    AlgorithmPlugin,
    BUILT_IN,
    ENV_VAR,
    AlgorithmError,
    resolve=lambda package: f"{package}.config",
    check=lambda name, m: _declare_metrics(name, m) if hasattr(m, "METRICS") else [],
)
DECLARED = ALGORITHMS.declared


def config_module(name: str) -> ModuleType:
    """The torch-free declarations (`<package>.config`) of algorithm `name`."""
    return ALGORITHMS.get(name)


def algorithm(name: str) -> ModuleType:
    """The algorithm's build module (`<package>.build`, imports torch): its `build(ctx) -> AlgoParts`."""
    path = f"{ALGORITHMS.target(name)}.build"
    module = load_target(path)
    if not hasattr(module, "build"):
        raise AlgorithmError(f"algorithm {name!r} ({path}) does not declare build(ctx)")
    return module


def on_policy(name: str) -> bool | None:
    """Whether algorithm `name` learns on-policy; None for a name this process does not know
    (a record of an algorithm this install lacks, or one registered only elsewhere)."""
    return bool(config_module(name).ON_POLICY) if name in ALGORITHMS else None


def preset(name: str, observation: str | None) -> str:
    """The conf/algo preset that runs algorithm `name` on envs giving `observation`s."""
    return config_module(name).PRESETS.get(observation, name) if name in ALGORITHMS else name
