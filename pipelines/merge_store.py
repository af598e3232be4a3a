"""Merge a store that came back from another host (the GPU study's --out/mlruns/mlflow.db) into a
local one, to compare its runs with CPU runs in one MLflow UI. Runs already merged are skipped,
so merging again after a second study adds only its runs. docs/gpu.md, "Merging the store".

    python pipelines/merge_store.py results/h100                      # into sqlite:///mlruns/mlflow.db
    python pipelines/merge_store.py results/h100/mlruns/mlflow.db --into sqlite:///elsewhere/mlflow.db
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlbench.cli.command import Parser, preflight_or_exit
from rlbench.config.flags import existing_store

PROG = "pipelines/merge_store.py"


def source_uri(text: str) -> str:
    """A study's folder (its mlruns/mlflow.db), a database file, or a URI, as a tracking URI."""
    if "://" in text:
        return text
    path = Path(text).resolve()
    if path.is_dir() and (path / "mlruns" / "mlflow.db").is_file():
        path = path / "mlruns" / "mlflow.db"
    return f"sqlite:///{path}"


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="the study's --out folder, its mlflow.db, or a tracking URI")
    p.add_argument(
        "--into",
        default=os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlruns/mlflow.db",
        help="the store to merge into (default $MLFLOW_TRACKING_URI, else sqlite:///mlruns/mlflow.db)",
    )
    args = p.parse_args(argv)
    src = source_uri(args.source)
    if problem := existing_store("source", src, " (a study's --out folder holds mlruns/mlflow.db)"):
        p.error(problem)
    if Path(src.removeprefix("sqlite:///")).resolve() == Path(args.into.removeprefix("sqlite:///")).resolve():
        p.error(f"--into={args.into}: is the source itself; allowed: another store")
    preflight_or_exit(src, prog=PROG, key="source", reading=True)
    preflight_or_exit(args.into, prog=PROG, key="--into")
    from rlbench.tracking.merge import merge_store  # lazy: keeps mlflow off a refusal's start

    done = merge_store(src, args.into)
    print(
        f"merged {src} into {args.into}: {done.experiments} experiment(s), {done.copied} run(s) copied, "
        f"{done.skipped} already there"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
