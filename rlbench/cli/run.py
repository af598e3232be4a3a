"""`python -m rlbench [overrides]` / `python -m rlbench -m actors=4,40,256`: the Hydra shell.
All work happens in rlbench.train.job.run_job; a single run's command line is composed and
validated once, before any output folder exists, and run on that composition; a refusal ends
with one line and exit 2 (docs/jobs.md, "Refused early"). The door: rlbench/__main__.py.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core import utils as hydra_utils  # its run_job: how Hydra's run and its launchers start a job
from hydra.types import HydraContext, RunMode

from rlbench.api.task import task
from rlbench.cli.command import exits
from rlbench.config.schema import register_configs
from rlbench.core.signals import exit_stopped
from rlbench.prepare.command_line import checked_command_line
from rlbench.prepare.compose import CONF_DIR
from rlbench.prepare.hydra_private import callbacks_of
from rlbench.prepare.job import handing

PROG = "rlbench"  # the last line's prefix: `rlbench: <message>`


# Hydra's main: its own flags (--cfg, --help, ...) and -m (a sweep, a search) go through it
_entry = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(task)


def main() -> None:
    """A single run composed and validated once, refused before any folder exists, then run on
    that one composition as Hydra's run mode runs a job, through the plugin API launchers use
    (`@hydra.main` would compose the line twice more: its mode probe, its run). Hydra's own
    flags and -m (a sweep, a search) go to Hydra's main."""
    register_configs()
    try:
        with exits(PROG):  # a bad key, preset, value, mode or store: one line, exit 2, no folder
            checked = checked_command_line(sys.argv[1:], stores=True)
        if checked is None:
            with exits(PROG):  # a typed error the task or the sweeper carried through Hydra
                _entry()
            return
        cfg, config = checked
        hydra_utils.configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
        cfg.hydra.mode = RunMode.RUN  # as Hydra's run sets it where the config names no mode
        callbacks = callbacks_of(cfg)  # the config's hydra.callbacks, called as Hydra's run calls them
        callbacks.on_run_start(config=cfg, config_name="config")
        context = HydraContext(config_loader=None, callbacks=callbacks)  # run_job reads only its callbacks
        with (
            exits(PROG),
            handing({tuple(cfg.hydra.overrides.task): config}),
        ):  # the task takes the config validated here
            ran = hydra_utils.run_job(task, cfg, "hydra.run.dir", None, hydra_context=context)  # its folder: run.dir
        callbacks.on_run_end(config=cfg, config_name="config", job_return=ran)
        _ = ran.return_value  # a job's exception raised again, as Hydra's run does
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: its runs ended KILLED; one line and 128 + the signal
        exit_stopped(e)


if __name__ == "__main__":
    main()
