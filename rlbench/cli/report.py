"""`python -m rlbench.report`: read a sweep, search or experiment from MLflow, write the report,
and log it on the parent run (artifact folder `report/`; docs/metrics.md, "Report artifacts")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlbench.api.report import DEFAULT_URI, make_report
from rlbench.cli.command import Parser, command
from rlbench.config.flags import existing_store, number, writable_folder

PROG = "rlbench.report"  # the refusals' prefix: `rlbench.report: --flag=value: ... allowed: ...`


def parse(argv: list[str] | None) -> argparse.Namespace:
    share = number(float, lo=0, hi=1, hi_open=True)
    p = Parser(prog=PROG, description=__doc__)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--sweep", metavar="RUN_ID", help="parent run id of a sweep or a search")
    which.add_argument("--study", metavar="NAME", help="an Optuna study's name (its parent run is found by tag)")
    which.add_argument("--experiment", metavar="NAME", help="every job run of an MLflow experiment")
    p.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI,
        help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else {DEFAULT_URI})",
    )
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<id>)")
    p.add_argument(
        "--knee-share",
        type=share,
        default=0.10,
        help="knee: more actors must shorten the task by at least this share of its time (default 0.10)",
    )
    p.add_argument(
        "--tolerance",
        type=share,
        default=0.05,
        help="recommendation: trade up to this share of the best fps for less energy (default 0.05)",
    )
    p.add_argument("--no-log", action="store_true", help="write the files only; log nothing to MLflow")
    args = p.parse_args(argv)
    for flag in ("--sweep", "--study", "--experiment"):
        value = getattr(args, flag[2:])
        if value is not None and not value.strip():
            p.error(f"{flag}={value!r}: allowed: a non-empty run id or name")
    problem = writable_folder("--out", args.out or Path("reports")) or existing_store(
        "--tracking-uri", args.tracking_uri
    )
    if problem:
        p.error(problem)
    return args


def show(report) -> None:
    """What the report command prints of a Report (rlbench/api/report.py)."""
    print(f"rlbench report: {report.title} ({report.finished}/{report.jobs} jobs finished)")
    print("\n".join(f"  {line}" for line in report.lines))
    for name, why in report.not_drawn.items():
        print(f"  figure {name} not drawn: {why}")
    print(f"  written: {report.html} and {len(report.figures)} PNG(s) in {report.html.parent}")
    if report.logged_on:
        print(f"  logged under report/ on run {report.logged_on}")


@command(PROG)
def main(argv: list[str] | None = None) -> int:

    args = parse(argv)
    report = make_report(
        args.sweep,
        study=args.study,
        experiment=args.experiment,
        tracking_uri=args.tracking_uri,
        out=args.out,
        knee_share=args.knee_share,
        tolerance=args.tolerance,
        log=not args.no_log,
    )
    show(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
