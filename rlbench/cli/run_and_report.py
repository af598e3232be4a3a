"""One-command experiment pipelines: run a sweep or a search, then its report.

The scripts in pipelines/ name their overrides and call `run_pipeline`, which runs them through
the Python API in this process (`rlbench.sweep`, or `rlbench.search` for a `search=` preset),
then `rlbench.make_report` on the parent run the result names. docs/jobs.md, "Pipelines".
"""

from __future__ import annotations

import os
from pathlib import Path

from rlbench.api.report import make_report
from rlbench.api.sweep import search, sweep
from rlbench.cli.command import Parser, command, preflight_or_exit
from rlbench.cli.report import show
from rlbench.config.flags import writable_folder
from rlbench.config.rules import ConfigError
from rlbench.core.errors import Failure, Refusal
from rlbench.prepare.command_line import precheck as rlbench_precheck
from rlbench.prepare.compose import compose_checked

ROOT = Path(__file__).resolve().parents[2]  # the clone: rlbench/cli/ is two below it


def merge(base: list[str], extra: list[str]) -> list[str]:
    """Overrides `base` then `extra`; a key given in `extra` replaces the same key in `base`."""
    keys = {o.split("=", 1)[0].lstrip("+~") for o in extra}
    return [o for o in base if o.split("=", 1)[0].lstrip("+~") not in keys] + list(extra)


def tracking_uri(overrides: list[str]) -> str:
    """The store the jobs will use, resolved as they resolve it: the config composed with the
    tracking and experiment overrides (presets, MLFLOW_TRACKING_URI, tracking.uri=...).
    ConfigError (naming the override) for a bad key, preset or value among them."""

    keep = [o for o in overrides if o.split("=", 1)[0].lstrip("+~").split(".")[0] in ("tracking", "experiment")]
    return compose_checked(keep).tracking.uri


def is_search(overrides: list[str]) -> bool:
    return any(o.split("=", 1)[0].lstrip("+") == "search" and not o.endswith("=null") for o in overrides)


def run_sweep_command(overrides: list[str]):
    """The sweep (or the search) of `overrides` through the Python API: its result."""
    return (search if is_search(overrides) else sweep)(overrides)


def precheck(overrides: list[str]) -> str | None:
    """The pipeline's overrides checked as `python -m rlbench -m` checks them (keys, presets,
    values; each sweep's job is checked by the sweep itself), before any job starts."""

    return rlbench_precheck(["-m", *overrides])


def parse(name: str, argv: list[str] | None):
    p = Parser(prog=f"pipelines/{name}.py", description=f"{name}: run it, then its report.")
    p.add_argument("--quick", action="store_true", help="a few-minute variant for a 2-core CPU machine")
    p.add_argument("--report-out", type=Path, default=None, help="report folder (default: reports/<parent run id>)")
    p.add_argument("overrides", nargs="*", help="extra rlbench overrides, e.g. env=breakout tracking.uri=...")
    args = p.parse_args(argv)
    args.report_out = args.report_out.resolve() if args.report_out else None
    if args.report_out is not None and (problem := writable_folder("--report-out", args.report_out)):
        p.error(problem)
    return p, args


def run_pipeline(name: str, full: list[str], quick: list[str], argv: list[str] | None = None) -> int:
    """The pipeline's command: its overrides checked (one line, exit 2, no job), the sweep or
    search, then its report; exit 1 where a job failed (the report is written all the same)."""
    p, args = parse(name, argv)
    os.chdir(ROOT)  # relative stores (sqlite:///mlruns/...) mean the same to the jobs and the report
    overrides = merge(quick if args.quick else full, args.overrides)
    try:
        problem = precheck(overrides)
        uri = tracking_uri(overrides)
    except ConfigError as e:
        problem = str(e)
    if problem:
        p.error(f"{problem} (no job started, no report)")
    preflight_or_exit(uri, prog=f"pipelines/{name}.py")  # the store the sweep and the report use: one line, exit 2
    return sweep_then_report(f"pipelines/{name}.py", overrides, args.report_out)


def sweep_then_report(prog: str, overrides: list[str], out: Path | None) -> int:
    @command(prog)
    def run() -> int:
        try:
            result = run_sweep_command(overrides)
        except Refusal as e:
            raise Refusal(f"{e} (no report)") from e
        if result is None:
            return 0  # dry_run=true: the submission printed, nothing ran
        show(make_report(result.parent_run_id, tracking_uri=result.tracking_uri, out=out))
        if result.status != "FINISHED":
            what = "search" if is_search(overrides) else "sweep"
            raise Failure(f"the {what} ended {result.status}; its report is written")
        return 0

    return run()
