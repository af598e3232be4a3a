"""Hydra's private parts that rlbench uses, each with its reason; only here (tests/test_layers.py
checks). Everything else goes through Hydra's public API: hydra.main, compose, HydraConfig,
ConfigStore, the override parser and the plugin interfaces (Sweeper, Launcher, JobReturn).
"""

from __future__ import annotations

import sys

from hydra import version
from hydra._internal.callbacks import Callbacks
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.hydra import Hydra
from hydra._internal.utils import create_config_search_path
from hydra.core.global_hydra import GlobalHydra

# Hydra's basic launcher, told by name: its plugin scan executes that module again at each scan
BASIC_LAUNCHER = ("hydra._internal.core_plugins.basic_launcher", "BasicLauncher")

__all__ = ["BASIC_LAUNCHER", "apply_values", "basic_sweeper", "callbacks_of", "failure", "multirun", "preset_params"]


def basic_sweeper() -> type:
    """The grid sweeper rlbench's sweeper extends (its grid expansion, split_arguments): Hydra
    has no public one. Read from its module as it is now: each plugin scan executes it again."""
    __import__("hydra._internal.core_plugins.basic_sweeper")
    return sys.modules["hydra._internal.core_plugins.basic_sweeper"].BasicSweeper


def callbacks_of(cfg) -> Callbacks:
    """The callbacks a config names (hydra.callbacks), as Hydra's run calls them: run_job takes
    them in its HydraContext (a single run composed once: cli/run.py main), and Hydra has
    no public constructor for them."""
    return Callbacks(cfg)


def apply_values(values: list, cfg) -> None:
    """Set a job's value overrides on a config composed once from its groups, as Hydra's own
    composition sets them (a 40-job grid refused in 8 s, not 15: prepare/grid.py JobComposer)."""
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)


def preset_params(sweeper) -> list[str]:
    """The grid an experiment preset gives in hydra.sweeper.params, as BasicSweeper reads it."""
    return sweeper._parse_config()


def failure(ret) -> BaseException:
    """A failed job's exception: JobReturn's public return_value raises it again instead."""
    return ret._return_value


def multirun(config_dir: str, overrides: list[str], task_function) -> object:
    """Hydra's multirun of `overrides` in this process, as `@hydra.main` runs `-m` but without
    reading sys.argv (the Python API, rlbench/api/sweep.py): the sweeper's return value. Hydra's
    global state is cleared after, so that the caller can compose or run again. Hydra has no
    public entry for this: `_run_hydra` parses the command line itself."""
    version.setbase("1.3")  # as hydra.main(version_base="1.3") sets it (rlbench/cli/run.py)
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2(task_name="rlbench", config_search_path=create_config_search_path(config_dir))
    try:
        # hydra.mode: as _run_hydra adds it for -m (a job's HydraConfig reads its mode)
        overrides = [*overrides, "hydra.mode=MULTIRUN"]
        return hydra.multirun(config_name="config", task_function=task_function, overrides=overrides)
    finally:
        GlobalHydra.instance().clear()
