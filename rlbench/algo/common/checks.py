"""Checks the algorithms share: the network's torso against the env's observations."""

from __future__ import annotations

from rlbench.algo import preset


def torso_checks(c) -> list[str]:
    """The network's torso fits the env's observations (vectors: mlp; Atari pixels: nature_cnn)."""
    vector = f"algo={preset(c.algo.name, 'gym')}"
    if c.env.kind == "gym" and c.algo.network.torso == "nature_cnn":
        return [f"algo.network.torso=nature_cnn: gym envs give vector observations; use mlp ({vector})"]
    if c.env.kind == "atari" and c.algo.network.torso == "mlp":
        return ["algo.network.torso=mlp: Atari gives image observations; use nature_cnn"]
    return []
