"""The study in one command: its stages as sweeps, in order, then one report over all its jobs.

    python pipelines/study.py                         # actors, sms, cpu, precision on Pong; then the report
    python pipelines/study.py --dry-run               # the jobs, what this host leaves out, an estimate
    python pipelines/study.py --tiny --out /tmp/r     # seconds-long CartPole jobs through the whole study
    python pipelines/study.py --stages actors,sms     # some stages only
    python pipelines/study.py resume=true             # continue a stopped study from its store

Each stage is an experiment preset (conf/experiment/study_*.yaml), so it also runs alone as
`python -m rlbench -m experiment=study_actors`. Extra overrides go to every job (env=breakout,
tracking.uri=...). docs/gpu.md, "The study".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlbench.api.study import STAGES, StudyResult, study
from rlbench.api.study_host import estimate_s
from rlbench.cli.command import Parser, command
from rlbench.cli.report import show
from rlbench.config.flags import number, writable_folder
from rlbench.core.signals import exit_stopped, sigterm_raises

ROOT = Path(__file__).resolve().parents[1]
PROG = "pipelines/study.py"


def stages(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names or any(s not in STAGES for s in names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text}: allowed: distinct comma-separated names of {', '.join(STAGES)}")
    return names


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stages", type=stages, default=list(STAGES), help=f"default {','.join(STAGES)}")
    p.add_argument("--dry-run", action="store_true", help="print the stages' jobs and an estimate; run nothing")
    p.add_argument("--tiny", action="store_true", help="seconds-long CartPole jobs (actors 4,8): the rehearsal")
    p.add_argument("--repeats", type=number(int, lo=1), help="runs per configuration (default: each preset's)")
    p.add_argument(
        "--min-steady-s",
        type=number(float, lo=0),
        default=20.0,
        help="each job's frames raised to hold this many steady seconds where this host's profile predicts so "
        "(default 20; 0: the presets' frames); every job makes the study task's 20 learner updates either way",
    )
    p.add_argument("--out", type=Path, help="the report's folder and summary.json (default reports/<experiment>)")
    p.add_argument("overrides", nargs="*", help="overrides for every job, e.g. env=breakout resume=true")
    args = p.parse_args(argv)
    if args.out is not None and (problem := writable_folder("--out", args.out)):
        p.error(problem)
    args.out = args.out and args.out.resolve()  # before the command moves to the clone
    return args


def plan_lines(result: StudyResult) -> list[str]:
    """Each stage's jobs, what this host left out and why, and the stage's estimated time."""
    lines = [f"[study] experiment {result.experiment} at {result.tracking_uri}"]
    for s in result.stages:
        seconds, why = estimate_s(s.common, s.jobs, result.tracking_uri) if s.jobs else (None, "no job")
        took = f"{seconds:.0f} s ({why})" if seconds is not None else why
        lines.append(f"[study] stage {s.name}: {len(s.jobs)} configurations; {took}; {s.sizing}")
        lines += [f"[study]   {job}" for job in s.jobs] + [f"[study]   left out: {n}" for n in s.left_out]
    return lines


def summary_lines(result: StudyResult) -> list[str]:
    """Each stage's parent run and status, then which host ran each job."""
    lines = [
        f"[study] stage {s.name}: "
        + (f"parent run {s.result.parent_run_id} {s.result.status}" if s.result else "not run")
        for s in result.stages
    ]
    lines += [f"[study] best actor count: {result.best_actors}"]
    for h in result.hosts:
        where = f"{h['host']} ({h['cpu_model']}; {h['gpu_name'] or 'no GPU'})"
        lines.append(f"[study]   {h['stage'] or '-'}  {h['name']}  {h['status']}  on {where}")
    return lines


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    os.chdir(ROOT)  # relative stores (sqlite:///mlruns/...) mean the same to the jobs and the report
    asked = {"tiny": args.tiny, "repeats": args.repeats, "out": args.out, "steady_s": args.min_steady_s}
    print("\n".join(plan_lines(study(args.stages, args.overrides, dry_run=True, **asked))), flush=True)
    if args.dry_run:
        return 0
    try:
        with sigterm_raises():  # between two sweeps too: the study stops as a sweep does, and resume=true continues
            result = study(args.stages, args.overrides, **asked)
    except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM: the running job ended KILLED; resume=true continues
        exit_stopped(e, PROG)
    print("\n".join(summary_lines(result)))
    if result.report is not None:
        show(result.report)
    failed = [s.name for s in result.stages if s.result is not None and s.result.status != "FINISHED"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
