"""What the registries of packages share (algorithms: rlbench/algo/__init__.py; env families:
rlbench/envs/__init__.py): a name -> package map read from an environment variable, a
registered package's module imported by name, and the declarations it lacks. The registry is
the seam the layer test sees no arrow through: docs/jobs.md, "Refused early".
"""

from __future__ import annotations

import importlib
from types import ModuleType


class RegistryError(KeyError):
    """A name a registry does not know, or a package lacking a declaration."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def from_env(var: str, value: str, error: type[RegistryError]) -> dict[str, str]:
    """{name: package} of `value`, the environment variable `var` ("name=package[,...]")."""
    out = {}
    for item in filter(None, (s.strip() for s in value.split(","))):
        name, sep, package = item.partition("=")
        if not (sep and name.strip() and package.strip()):
            raise error(f"{var}={value!r}: {item!r} is not name=package")
        out[name.strip()] = package.strip()
    return out


def import_module(what: str, module: str, package: str, error: type[RegistryError]) -> ModuleType:
    """`module` of the registered `package`; `what` (e.g. "algorithm 'tiny'") names it when the
    package itself is missing (an import that fails inside it is raised as it is)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):  # the package itself is missing, not one of its imports
            raise error(f"{what}: no module {module} (registered as {package})") from e
        raise


def missing(module: ModuleType, declared: tuple[str, ...]) -> list[str]:
    """The names of `declared` that `module` does not define."""
    return [d for d in declared if not hasattr(module, d)]
