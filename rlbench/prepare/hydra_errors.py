"""Hydra's composition errors as rlbench's refusal: `<key>=<value>: ... allowed: ...`.

`explain` names the key, the value and what is allowed instead, reading which algorithm or env
family has a key from their schemas (the registries). docs/jobs.md, "Refused early".
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.errors import MissingConfigException, OverrideParseException

from rlbench.core.algorithms import ALGORITHMS, config_module
from rlbench.core.env_families import FAMILIES, family

TYPES = {"Integer": "an integer", "Float": "a finite number", "Boolean": "true or false", "String": "a string"}


def _value(overrides: Sequence[str], key: str) -> str:
    for o in overrides:
        k, _, v = o.lstrip("+~").partition("=")
        if k == key:
            return v
    return "?"


def _presets(conf_dir: Path, group: str, schema: str) -> list[str]:
    """The presets of conf/<group>/ that extend `schema/<group>: <schema>`."""
    found = []
    for path in sorted((conf_dir / group).glob("*.yaml")):
        defaults = (yaml.safe_load(path.read_text()) or {}).get("defaults", [])
        if any(isinstance(d, dict) and schema in d.values() for d in defaults):
            found.append(f"{group}={path.stem}")
    return found


def _owners(group: str, leaf: str) -> tuple[dict[str, list[str]], Callable[[str], type]]:
    """Which algorithms (group algo) or env families (group env) have key `leaf`, and their Schema by name."""
    if group == "algo":
        names, schema = ALGORITHMS, (lambda n: config_module(n).Schema)
    else:
        names, schema = FAMILIES, (lambda n: family(n).Schema)
    return {n: [] for n in names if leaf in typing.get_type_hints(schema(n))}, schema


def _not_in_schema(key: str, value: str, selected: str | None, conf_dir: Path) -> str:
    """algo.<leaf> or env.<leaf> that the selected algorithm or family lacks."""
    group, leaf = key.split(".", 1)
    what = "algorithm" if group == "algo" else "env family"
    owners, schema = _owners(group, leaf.split(".")[0])
    if selected is None:  # another override is wrong too: say what can be said without it
        selected = "selected"
        allowed = "see conf/" + group
        head = f"{key}={value}: the selected {what} has no key '{leaf}'"
    else:
        allowed = ", ".join(sorted(typing.get_type_hints(schema(selected))))
        head = f"{key}={value}: the selected {what} {selected} has no key '{leaf}'"
    if not owners:
        return f"{head}; allowed keys of {selected}: {allowed}"
    picks = [p for n in owners for p in (_presets(conf_dir, group, n) or [f"{group}={n}"])]
    return (
        f"{head}; '{leaf}' is a key of the {what} {', '.join(owners)} (select it: {' or '.join(picks)}; "
        f"a '+{key}' would add a key {selected} never reads); allowed keys of {selected}: {allowed}"
    )


def _selected(group: str, compose: Callable[[list[str]], object], overrides: Sequence[str], key: str) -> str | None:
    """The algorithm (algo.name) or env family (env.kind) the overrides select, the bad key left out."""
    try:
        cfg = compose([o for o in overrides if o.lstrip("+~").partition("=")[0] != key])
    except Exception:  # noqa: BLE001 - another bad override: its own message comes next time
        return None
    node = cfg.get(group) or {}
    return node.get("name" if group == "algo" else "kind")


def _bad_syntax(overrides: Sequence[str]) -> str | None:
    parser = OverridesParser.create()
    for o in overrides:
        try:
            parser.parse_overrides([o])
        except OverrideParseException as e:
            return (
                f"{o}: cannot be parsed ({str(e).splitlines()[0]}); allowed: key=value in Hydra's override "
                "grammar (quote values with spaces or brackets: key='a b')"
            )
    return None


def _options(conf_dir: Path, group: str) -> str:
    """A group's presets: conf/<group>/*.yaml, else what Hydra and its plugins register (hydra/sweeper)."""
    files = sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))
    if files:
        return f"one of {', '.join(files)} (conf/{group}/)"
    Plugins.instance()  # the plugins' configs are registered as they are discovered
    try:
        stored = sorted(n.removesuffix(".yaml") for n in ConfigStore.instance().list(group))
    except OSError:
        stored = []
    return f"one of {', '.join(stored)} (Hydra's and its plugins')" if stored else "none found (a group Hydra lacks)"


def _hint(group: str, option: str) -> str:
    """Why rlbench's own sweeper can be missing: its plugin folder was not installed."""
    if (group, option) != ("hydra/sweeper", "rlbench"):
        return ""
    return (
        "; rlbench's sweeper is the plugin hydra_plugins/rlbench_sweeper, not importable here: install rlbench "
        "whole (pip install -e .); `pip install --target DIR` skips it where DIR already holds hydra_plugins/"
    )


def explain(error: Exception, overrides: Sequence[str], conf_dir: Path, compose: Callable[[list[str]], object]) -> str:
    """One line for a composition error of `overrides`: key, value, what is allowed."""

    if isinstance(error, OverrideParseException):
        return _bad_syntax(overrides) or f"overrides {' '.join(overrides)}: {str(error).splitlines()[0]}"
    if isinstance(error, MissingConfigException):
        m = re.search(r"Could not find '([^']+)/([^']+)'", str(error))
        if m:
            group, option = m.groups()
            allowed = _options(conf_dir, group) + _hint(group, option)
            return f"{group}={option}: no such {group} preset; allowed: {allowed}"
    cause = error.__cause__ or error
    key = getattr(cause, "full_key", None)
    text = str(cause).splitlines()[0]
    if key:
        value = _value(overrides, key)
        m = re.search(r"could not be converted to (\w+)|is not a valid (bool)", text)
        if m:
            kind = m.group(1) or "Boolean"
            return f"{key}={value}: allowed: {TYPES.get(kind, kind)} (rlbench/config/schema.py)"
        group = key.split(".")[0]
        if "not in" in text and group in ("algo", "env") and "." in key:
            return _not_in_schema(key, value, _selected(group, compose, overrides, key), conf_dir)
        return f"{key}={value}: {text}"
    return f"overrides {' '.join(overrides)}: {text}"
