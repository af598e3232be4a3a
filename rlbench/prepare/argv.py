"""Early check of command-line override keys, with the allowed keys and a suggestion.

Hydra refuses an unknown key too, but only says it is "not in struct"; this names the key, the
value, the keys that are allowed at that level and the closest match, before Hydra creates
anything (docs/jobs.md, "Refused early").
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from pathlib import Path

from rlbench.config.schema import Config
from rlbench.core.env_families import FAMILIES, family

# Groups that conf/config.yaml leaves null: their keys exist only once one is selected.
NULL_GROUPS = {"search": "search=ratio"}


def _schema_at(path: list[str]):
    """The dataclass at a dotted path of Config, or None if the path leaves the schema."""

    cls = Config
    for part in path:
        hints = typing.get_type_hints(cls)
        if part not in hints or not dataclasses.is_dataclass(hints[part]):
            return None
        cls = hints[part]
    return cls


def _allowed_keys(path: list[str]) -> list[str] | None:
    """The keys at a dotted path of Config, or None if the path leaves the schema. `env` is
    typed by the family its kind picks, known only once composed: any family's key passes here."""
    if path == ["env"]:
        return sorted({key for name in FAMILIES for key in typing.get_type_hints(family(name).Schema)})
    cls = _schema_at(path)
    return None if cls is None else sorted(typing.get_type_hints(cls))


def check_override_keys(argv: list[str], conf_dir: Path) -> str | None:
    """A message for the first override whose key rlbench does not have, else None."""

    groups = {p.name for p in conf_dir.iterdir() if p.is_dir()} | {"hydra"}
    for arg in argv:
        if arg.startswith(("-", "~")) or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        plus, key = key[: len(key) - len(key.lstrip("+"))], key.lstrip("+")  # +key adds, ++key adds or sets
        parts = key.split(".")
        if parts[0] in groups and len(parts) == 1 or key.startswith("hydra"):
            continue
        if parts[0] in NULL_GROUPS and len(parts) > 1 and not any(a.split("=", 1)[0] == parts[0] for a in argv):
            return (
                f"'{key}' (value '{value}') is a key of the {parts[0]} group, which is not selected "
                f"({parts[0]}=null by default); select it first, e.g. {NULL_GROUPS[parts[0]]}"
            )
        allowed = _allowed_keys(parts[:-1])
        if allowed is None:
            continue  # a deeper path Hydra checks itself
        if len(parts) == 1:
            allowed = sorted(set(allowed) | groups - {"hydra"})
        if parts[-1] not in allowed:
            near = difflib.get_close_matches(parts[-1], allowed, n=1)
            hint = f"; did you mean '{'.'.join(parts[:-1] + near)}'?" if near else ""
            where = "top-level" if len(parts) == 1 else f"'{'.'.join(parts[:-1])}'"
            return (
                f"unknown config key '{plus}{key}' (value '{value}'); allowed {where} keys: {', '.join(allowed)}{hint}"
            )
    return None
