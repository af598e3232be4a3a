"""Helpers for validation rules (torch-free): each rule is a key, a test of its value and a
sentence saying what is allowed; `validate` reports every broken one. The generic keys, the
env families and the algorithms write their rules with them (docs/algorithms.md, docs/envs.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlbench.core.errors import Refusal


class ConfigError(Refusal, ValueError):
    """A config value is outside what rlbench accepts; the message names key, value, rule.
    A refusal: a command ends on it with one line and exit 2 (rlbench/core/errors.py)."""


Rules = dict[str, tuple[Callable[[Any], bool], str]]


def int_at_least(lo: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v >= lo), f"an integer >= {lo}"


def optional_in(lo: int, hi: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v is None or lo <= v <= hi), f"null or an integer in [{lo}, {hi}]"


def one_of(*allowed: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in allowed), "one of " + ", ".join(allowed)
