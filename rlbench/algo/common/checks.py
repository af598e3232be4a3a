"""Checks the algorithms share: the network's torso against the observations the env family
declares (its OBSERVATION, rlbench/core/env_families.py), never against the family's name (docs/envs.md)."""

from __future__ import annotations

from rlbench.core.algorithms import preset
from rlbench.core.env_families import family

TORSO = {"image": "nature_cnn", "vector": "mlp"}  # the torso for each kind of observation


def torso_checks(c) -> list[str]:
    """The network's torso fits the env's observations (vectors: mlp; images: nature_cnn)."""
    observation = family(c.env.kind).OBSERVATION
    want = TORSO[observation]
    if c.algo.network.torso == want:
        return []
    why = f"{c.env.kind} envs give {observation} observations"
    return [f"algo.network.torso={c.algo.network.torso}: {why}; use {want} (algo={preset(c.algo.name, observation)})"]
