"""Helpers for the algorithms' validation rules (torch-free): each rule is a key, a test of
its value and a sentence saying what is allowed; `validate` reports every broken one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlbench.algo import preset

Rules = dict[str, tuple[Callable[[Any], bool], str]]


def int_at_least(lo: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v >= lo), f"an integer >= {lo}"


def optional_in(lo: int, hi: int) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v is None or lo <= v <= hi), f"null or an integer in [{lo}, {hi}]"


def one_of(*allowed: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in allowed), "one of " + ", ".join(allowed)


def torso_checks(c) -> list[str]:
    """The network's torso fits the env's observations (vectors: mlp; Atari pixels: nature_cnn)."""
    vector = f"algo={preset(c.algo.name, 'gym')}"
    if c.env.kind == "gym" and c.algo.network.torso == "nature_cnn":
        return [f"algo.network.torso=nature_cnn: gym envs give vector observations; use mlp ({vector})"]
    if c.env.kind == "atari" and c.algo.network.torso == "mlp":
        return ["algo.network.torso=mlp: Atari gives image observations; use nature_cnn"]
    return []
