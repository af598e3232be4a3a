"""What an env.id gives the agent (observation shape and dtype, action count), known
before any actor starts, and a one-line reason when an id cannot run under its env.kind.
Each env family probes its own ids (its `spec`: rlbench/envs/<family>/probe.py; docs/envs.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlbench.core.env_families import EnvFamilyError, family


class EnvIdError(ValueError):
    """env.id cannot run under env.kind; the message says why in one line."""


@dataclass(frozen=True)
class EnvSpec:
    """One actor's observation (stack frames along axis 0) and its number of actions."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int
    stack: int  # frames stacked along obs axis 0; 1 = none (vector observations)
    frame_shape: tuple[int, ...]  # obs_shape without the stack axis; = obs_shape without a stack

    @property
    def bytes_per_frame(self) -> int:
        """Bytes of one unstacked frame."""
        return int(np.prod(self.frame_shape, dtype=np.int64)) * self.obs_dtype.itemsize


def env_spec(cfg) -> EnvSpec:
    """The spec of cfg's env without starting a vector env; raises EnvIdError if it cannot run
    (an env.kind that names no family included)."""

    try:
        declared = family(cfg.kind)
    except EnvFamilyError as e:
        raise EnvIdError(str(e)) from e
    return declared.spec(cfg)


def check_env(cfg) -> str | None:
    """None if cfg's env can run under its env.kind, else a one-line reason."""
    try:
        env_spec(cfg)
    except EnvIdError as e:
        return str(e)
    return None
