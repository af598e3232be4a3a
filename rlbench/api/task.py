"""Hydra's task function, the one way every job starts (a single run, a sweep's, a search's, in
this process or in a launcher's): the composed config as a Job, run by run_job. A refusal or a
single run's fault is carried through Hydra as a typed error (rlbench/core/errors.py carried):
the command says its line, the Python API raises it. docs/architecture.md, "How a job runs".
"""

from __future__ import annotations

import traceback
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rlbench.core.disk import first_line, full_disk
from rlbench.core.errors import Failure, Refusal, carried
from rlbench.core.resources import ResourceError
from rlbench.core.signals import recorded
from rlbench.prepare.command_line import mode_problem
from rlbench.prepare.job import Job, handed
from rlbench.prepare.plan import placement_for
from rlbench.prepare.validate import validate


def fault_text(error: BaseException) -> str:
    """The cause in one line: a full disk by name wherever it sits in the chain (MLflow wraps
    SQLite's), else the error's first line."""
    full = full_disk(error)
    if full is not None:
        return (
            f"the disk is full: the store or an artifact could not be written ({type(full).__name__}: "
            f"{first_line(full)[:200]}); free space there and run it again"
        )
    return f"{type(error).__name__}: {first_line(error)}"


def _failed(error: Exception, log_file: Path) -> Failure:
    """A job that failed from a fault: its traceback to the job's log file, and the Failure
    (exit 1) whose line says the cause, the run (as the store reads it: FAILED, or RUNNING
    where its end could not be written) and where the traceback is, or why it is nowhere."""
    run, status = getattr(error, "run_id", None), getattr(error, "run_status", "FAILED")  # as the store reads it
    ended = "ended FAILED" if status == "FAILED" else recorded(status)
    return Failure(
        f"the job failed: {fault_text(error)}"
        f"{f' (run {run} {ended})' if run else ' (before its run started)'}; {_traceback_to(log_file, error)}"
    )


def _traceback_to(log_file: Path, error: Exception) -> str:
    """The traceback appended to `log_file`; where it went, or (a full disk) why it went nowhere:
    the failure's own path must not need the disk."""
    try:
        with open(log_file, "a") as f:
            traceback.print_exception(error, file=f)
    except OSError as e:
        return f"no traceback kept: {log_file} could not be written ({e.strerror or e})"
    return f"traceback in {log_file}"


def task(cfg: DictConfig) -> dict:
    """Hydra's task function: the composed config as a Job (the one main() or a sweep or search
    validated, else validated here), run by run_job with the observers handed to it."""
    hc = HydraConfig.get()
    with carried(refusing=(ResourceError,)):  # ResourceError: the plan's, before any run exists
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
