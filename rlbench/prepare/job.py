"""A job as run_job takes it: its one frozen, typed config and where it came from (`Job`).

`job_of` validates a composed config once and freezes it. A sweep or search in this process
hands Hydra's launcher the configs it validated and the observers its jobs get (`handing`), and
the Hydra entry takes them (`handed`) instead of validating again or patching the launcher.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from rlbench.config.frozen import freeze
from rlbench.config.schema import Config
from rlbench.prepare.plan import Placement
from rlbench.prepare.validate import validate


@dataclass(frozen=True)
class Job:
    """One job: its validated config (frozen: nothing changes it up to its record), the command
    line's overrides that made it (its run name and `overrides` tag), its output folder (its
    log and .hydra/ go into the record) and where its actor tasks go (actor_hosts > 0)."""

    config: Config
    overrides: tuple[str, ...] = ()
    output_dir: Path | None = None
    placement: Placement = Placement()

    def __post_init__(self):
        object.__setattr__(self, "config", freeze(self.config))  # a frozen copy; one already frozen as is
        object.__setattr__(self, "overrides", tuple(self.overrides))


def job_of(
    config: Config | DictConfig,
    overrides: Sequence[str] | None = (),
    output_dir: Path | None = None,
    placement: Placement | None = None,
) -> Job:
    """The Job of a validated Config, or of a composed DictConfig validated here (ConfigError)."""
    typed = config if isinstance(config, Config) else validate(config)
    return Job(typed, tuple(overrides or ()), output_dir, placement or Placement())


_HANDED: contextvars.ContextVar[tuple[Mapping[tuple[str, ...], Config], tuple]] = contextvars.ContextVar(
    "handed", default=({}, ())
)


@contextlib.contextmanager
def handing(configs: Mapping[tuple[str, ...], Config] | None = None, observers: Sequence = ()) -> Iterator[None]:
    """While inside: a job Hydra launches in this process with one of `configs`' override lists
    takes that validated config, and every job gets `observers` (a search trial's pruner)."""
    token = _HANDED.set((dict(configs or {}), tuple(o for o in observers if o is not None)))
    try:
        yield
    finally:
        _HANDED.reset(token)


def handed(overrides: Sequence[str]) -> tuple[Config | None, tuple]:
    """The config validated for the job `overrides` (None: validate it) and the observers handed."""
    configs, observers = _HANDED.get()
    return configs.get(tuple(overrides)), observers
