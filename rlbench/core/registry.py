"""The one registry type behind algorithms, env families and power meters: names mapped to
importable targets ("package", "module" or "module:attr"), each loaded by name at run time and
checked against its plugin contract, a `typing.Protocol` (docs/architecture.md, "Plugins")."""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class RegistryError(KeyError):
    """A name a registry does not know, or a plugin lacking part of its contract."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def protocol_members(contract: type) -> tuple[str, ...]:
    """The names a `typing.Protocol` declares (its attributes, then its methods), in order."""
    names = list(inspect.get_annotations(contract))
    names += [n for n, v in contract.__dict__.items() if callable(v) and not n.startswith("_")]
    return tuple(dict.fromkeys(names))


def load_target(target: str) -> Any:
    """The object a target names: "module" (the module) or "module:attr" (an attribute of it)."""
    module, _, attr = target.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attr) if attr else loaded


class Registry(Generic[T]):
    """`what` plugins by name: the built-in ones, those of the environment variable `env_var`
    ("name=target[,...]") and those added with `register`. `resolve(target)` is what is
    imported (e.g. a package's `config` module); `check(name, plugin)` returns what the plugin
    lacks of `contract`. A plugin is loaded and checked once, at registration or first use."""

    def __init__(
        self,
        what: str,
        key: str,
        contract: type,
        built_in: dict[str, str],
        env_var: str,
        error: type[RegistryError],
        resolve: Callable[[str], str] = lambda t: t,
        check: Callable[[str, Any], list[str]] | None = None,
    ) -> None:
        self.what, self.key, self.contract, self.env_var, self.error = what, key, contract, env_var, error
        self.built_in, self._resolve, self._check = dict(built_in), resolve, check
        self.declared = protocol_members(contract)
        self._targets: dict[str, Any] = {**built_in, **self.parse_env(os.environ.get(env_var, ""))}
        self._loaded: dict[str, T] = {}

    def parse_env(self, value: str) -> dict[str, str]:
        """{name: target} of the environment variable's value."""
        out = {}
        for item in filter(None, (s.strip() for s in value.split(","))):
            name, sep, target = (p.strip() for p in item.partition("="))
            if not (sep and name and target):
                raise self.error(f"{self.env_var}={value!r}: {item!r} is not name=target")
            out[name] = target
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._targets))

    def target(self, name: str) -> str:
        if name not in self._targets:
            raise self.error(
                f"{self.key}={name!r}: no such {self.what}; known: {', '.join(self._targets)} "
                f"(one built in, or one added with register() or {self.env_var})"
            )
        return self._targets[name]

    def register(self, name: str, target: str | T) -> T:
        """Add plugin `name`; it is loaded and checked now, and refused naming what it lacks."""
        if name in self.built_in and self.built_in[name] != target:
            raise self.error(f"{self.what} {name!r} is built in ({self.built_in[name]}); choose another name")
        self._targets[name] = target
        self._loaded.pop(name, None)
        try:
            return self.get(name)
        except RegistryError:
            self.unregister(name)
            raise

    def unregister(self, name: str) -> None:
        """Forget a plugin added with register() (tests); the built-in ones stay."""
        if name not in self.built_in:
            self._targets.pop(name, None)
            self._loaded.pop(name, None)

    def get(self, name: str) -> T:
        """Plugin `name`, loaded and checked against the contract."""
        if name in self._loaded:
            return self._loaded[name]
        target = self.target(name)
        path = self._resolve(target) if isinstance(target, str) else repr(target)
        try:
            plugin = load_target(path) if isinstance(target, str) else target
        except ModuleNotFoundError as e:
            if e.name and path.startswith(e.name):  # the plugin itself is missing, not one of its imports
                raise self.error(
                    f"{self.what} {name!r}: no module {path.partition(':')[0]} (registered as {target})"
                ) from e
            raise
        lacks = [d for d in self.declared if not hasattr(plugin, d)] + (
            self._check(name, plugin) if self._check else []
        )
        if lacks:
            raise self.error(
                f"{self.what} {name!r} ({path}) does not declare {', '.join(lacks)}; every {self.what} "
                f"declares {', '.join(self.declared)} ({self.contract.__module__}.{self.contract.__name__})"
            )
        self._loaded[name] = plugin
        return plugin
