"""`python -m rlbench.report`: read a sweep, search or experiment from MLflow, write the report,
and log it on the parent run (artifact folder `report/`; docs/metrics.md, "Report artifacts")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlbench.cli.command import Parser, command
from rlbench.config.flags import existing_store, number, writable_folder
from rlbench.core.errors import Refusal
from rlbench.prepare.preflight import check
from rlbench.report.build import build_report
from rlbench.tracking.parent_note import with_report
from rlbench.tracking.readers import NoSuchRun, experiment_id
from rlbench.tracking.readers import study_parent as find
from rlbench.tracking.store import store_uri, use_store
from rlbench.tracking.study_records import load_experiment, load_parent

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
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


def study_parent(name: str) -> str:

    found = find(name)
    if found is None:
        raise LookupError(f"--study {name!r}: no search parent run with that study at {store_uri()}")
    return found.run_id


def load(args):
    """The study to report on; LookupError (or PreflightError) with the reason when there is none."""

    check(args.tracking_uri, key="--tracking-uri", reading=True)  # a store that cannot be used: one line, now
    if args.experiment:
        return load_experiment(args.experiment)
    parent = args.sweep or study_parent(args.study)
    try:
        study = load_parent(parent)
    except NoSuchRun as e:
        raise LookupError(f"--sweep {parent}: no such run at {e.uri} ({e.detail[:200]})") from e
    if not study.jobs and not study.missing:
        raise LookupError(
            f"--sweep {parent}: run '{study.title}' has no child runs; give a sweep's or a search's "
            "parent run id (the sweep prints it: '[rlbench sweep] parent run <id>')"
        )
    return study


def log_report(study, out: Path, verdict: list[str]) -> str:
    """Artifacts under `report/` on the parent, and the parent's description updated with the
    verdict and the report's link; an experiment gets a run of its own (role report)."""
    from rlbench.tracking.parent import open_parent, parent_run  # lazy: keeps mlflow, torch off the start

    if study.parent_id is None:
        run = open_parent(
            experiment_id(study.title.removeprefix("experiment ")),
            f"report {study.title}",
            "report",
            {"rlbench.role": "report"},
        )
        run.end("FINISHED")
    else:
        run = parent_run(study.parent_id)
    run.log_folder(out, "report")
    run.describe(with_report(run.description(), verdict, run.experiment_id, run.run_id))
    return run.run_id


@command(PROG)
def main(argv: list[str] | None = None) -> int:

    args = parse(argv)
    use_store(args.tracking_uri)
    try:
        study = load(args)
    except LookupError as e:  # no such run or study: a refusal; PreflightError is one already
        raise Refusal(str(e)) from e
    out = args.out or Path("reports") / (study.parent_id or args.experiment)
    result = build_report(study, out, args.knee_share, args.tolerance)
    print(f"rlbench report: {study.title} ({len(study.finished)}/{len(study.jobs) + len(study.missing)} jobs finished)")
    print("\n".join(f"  {line}" for line in result["lines"]))
    for name, why in result["not_drawn"].items():
        print(f"  figure {name} not drawn: {why}")
    print(f"  written: {result['html']} and {len(result['figures'])} PNG(s) in {out}")
    if not args.no_log:
        print(f"  logged under report/ on run {log_report(study, out, result['lines'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
