"""`python -m rlbench [overrides]` / `python -m rlbench -m actors=4,40,256`: the Hydra shell.
All work happens in rlbench.train.job.run_job; a single run's command line is composed and
validated once, before any output folder exists, and run on that composition; a refusal ends
with one line and exit 2 (docs/jobs.md, "Refused early"). The door: rlbench/__main__.py.
"""

from __future__ import annotations

import errno
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core import utils as hydra_utils  # its run_job: how Hydra's run and its launchers start a job
from hydra.core.hydra_config import HydraConfig
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig

from rlbench.cli.command import exits
from rlbench.config.schema import register_configs
from rlbench.core.errors import Failure, Refusal
from rlbench.core.resources import ResourceError
from rlbench.core.signals import exit_stopped, recorded
from rlbench.prepare.command_line import checked_command_line, mode_problem
from rlbench.prepare.compose import CONF_DIR
from rlbench.prepare.hydra_private import callbacks_of
from rlbench.prepare.job import Job, handed, handing
from rlbench.prepare.plan import placement_for
from rlbench.prepare.validate import validate

PROG = "rlbench"  # the last line's prefix: `rlbench: <message>`


def fault_text(error: BaseException) -> str:
    """The cause in one line: a full disk by name wherever it sits in the chain (MLflow wraps
    SQLite's), else the error's first line."""
    chain, e = [], error
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    full = [
        e
        for e in chain
        if (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT))
        or "database or disk is full" in _first_line(e)
    ]
    if full:
        return (
            f"the disk is full: the store or an artifact could not be written ({type(full[-1]).__name__}: "
            f"{_first_line(full[-1])[:200]}); free space there and run it again"
        )
    return f"{type(error).__name__}: {_first_line(error)}"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [""])[0]


def _failed(error: Exception, log_file: Path) -> Failure:
    """A job that failed from a fault: its traceback to the job's log file, and the Failure
    (exit 1) whose line says the cause, the run (as the store reads it: FAILED, or RUNNING
    where its end could not be written) and where the traceback is."""
    with open(log_file, "a") as f:
        traceback.print_exception(error, file=f)
    run, status = getattr(error, "run_id", None), getattr(error, "run_status", "FAILED")  # as the store reads it
    ended = "ended FAILED" if status == "FAILED" else recorded(status)
    return Failure(
        f"the job failed: {fault_text(error)}"
        f"{f' (run {run} {ended})' if run else ' (before its run started)'}; traceback in {log_file}"
    )


def task(cfg: DictConfig) -> dict:
    """Hydra's task function: the composed config as a Job (the one main() or a sweep or search
    validated, else validated here), run by run_job with the observers handed to it."""
    hc = HydraConfig.get()
    with exits(PROG, refusing=(ResourceError,)):  # ResourceError: the plan's, before any run exists
        if hc.mode.name == "RUN":  # main() checked it; this for a run Hydra's main started
            problem = mode_problem(cfg, hc.sweeper.get("params"), hc.runtime.choices)
            if problem:
                raise Refusal(problem)
        overrides, output_dir = list(hc.overrides.task), Path(hc.runtime.output_dir)
        try:
            config, observers = handed(overrides)
            # a bad value is refused before the trainer and MLflow are imported (~2 s, not ~6)
            config = validate(cfg) if config is None else config  # once: where no sweep, search or main() did
            job = Job(config, overrides, output_dir, placement_for(hc.launcher.get("_target_", ""), output_dir))
            from rlbench.train.job import run_job  # lazy: keeps matplotlib, mlflow, torch off the start

            result = run_job(job, observers)
        except (Refusal, ResourceError):
            raise  # refused: one line, exit 2
        except Exception as e:  # a fault in a single run: one line; a sweep records its failed job itself
            if hc.mode.name != "RUN":
                raise
            raise _failed(e, output_dir / f"{hc.job.name}.log") from e
    return result  # the job's result: a sweep's summary and a search's objectives read it


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
            _entry()
            return
        cfg, config = checked
        hydra_utils.configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
        cfg.hydra.mode = RunMode.RUN  # as Hydra's run sets it where the config names no mode
        callbacks = callbacks_of(cfg)  # the config's hydra.callbacks, called as Hydra's run calls them
        callbacks.on_run_start(config=cfg, config_name="config")
        context = HydraContext(config_loader=None, callbacks=callbacks)  # run_job reads only its callbacks
        with handing({tuple(cfg.hydra.overrides.task): config}):  # the task takes the config validated here
            ran = hydra_utils.run_job(task, cfg, "hydra.run.dir", None, hydra_context=context)  # its folder: run.dir
        callbacks.on_run_end(config=cfg, config_name="config", job_return=ran)
        _ = ran.return_value  # a job's exception raised again, as Hydra's run does
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: its runs ended KILLED; one line and 128 + the signal
        exit_stopped(e)


if __name__ == "__main__":
    main()
