"""The study on a GPU host in one command, within a budget: the actor sweep (its Figure 3), the
SM sweep through green contexts at the sweep's best actor count (its Figure 4), fp32 against
bf16 there; then the report and a one-page summary, all under --out. docs/gpu.md.

    python pipelines/gpu_study.py --out results/h100            # a GPU host: stops itself by --budget-s (420)
    python pipelines/gpu_study.py --dry-run                     # any host: the jobs, their predicted times, the total
    python pipelines/gpu_study.py --tiny --out /tmp/rehearsal   # seconds-long CartPole jobs through the whole script
    python pipelines/gpu_study.py --stage actors --dry-run      # one stage (actors, sms, cpu): its plan and parts
    python pipelines/gpu_study.py --stage actors --part 1 --out r/a1                  # a stay: the stage's part 1
    python pipelines/gpu_study.py --stage actors --part 2 --plan-from r/a1 --out r/a2 # the next stay: part 2

A stage runs jobs of 20 learner updates and 20 s of steady windows; the actors, sms and cpu
stages do not fit one 420-s stay (the 4-actor job alone is about 150 s), so a stage over the
budget runs in parts, each a stay with its own idle power and warm-up, every job and repeat kept
and none cut (docs/gpu.md, "Stages").

Without --stage, the jobs' task is sized before any job runs: the largest frames of a ladder whose predicted total
fills at most 3/4 of the budget, predicted by rlbench.predict from this host's env stepping
(measured first, a few seconds) and the GPU's published peak (rlbench/predict/datasheet.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlbench.cli import gpu_stage, gpu_study
from rlbench.cli.command import Parser, command
from rlbench.cli.gpu_study import PROG
from rlbench.config.flags import number, writable_folder
from rlbench.core.precision import PRECISIONS
from rlbench.predict.stage_plan import STAGE_ACTORS, STAGE_NAMES
from rlbench.predict.stage_planner import PLAN_FILE, TINY_ACTORS
from rlbench.predict.study_host import TARGET_GPU

ACTORS = [4, 16, 40, 128, 256]


# --- the command line ---------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1 or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text}: allowed: distinct comma-separated integers >= 1, e.g. 4,16,40")
    return values


def _sm_limits(text: str) -> str | list[int | None]:
    if text in ("auto", "none"):
        return text
    try:
        values = [None if v.strip() == "all" else int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v is not None and v < 1 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(
            f"{text}: allowed: auto (all, half, a quarter, 16 and 8), none (no SM "
            "sweep), or distinct comma-separated SM counts >= 1 and all, e.g. all,64,16"
        )
    return values


def _part_flag(text: str) -> tuple[int, int | None]:
    k, slash, n = text.partition("/")
    if not (k.isdigit() and int(k) >= 1 and (not slash or n.isdigit() and int(k) <= int(n))):
        raise argparse.ArgumentTypeError(f"{text}: allowed: K or K/N with 1 <= K <= N, e.g. 1 or 1/2")
    return int(k), int(n) if slash else None


def _frames(text: str) -> str | int:
    if text == "auto":
        return text
    return number(int, lo=1, note="or auto: sized to the budget")(text)


def parser() -> Parser:
    """The command's flags (their values checked by their types; together by parse)."""
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="folder for the store (mlruns/), the report and summary.md")
    p.add_argument(
        "--budget-s",
        type=number(float, lo=0, lo_open=True),
        default=420.0,
        help="wall seconds the whole run may take; it stops itself before (default 420)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the jobs and their predicted times; run nothing")
    p.add_argument("--tiny", action="store_true", help="seconds-long CartPole jobs (actors 4,8): the rehearsal")
    p.add_argument(
        "--stage",
        choices=STAGE_NAMES,
        help="one stage in one process, its own stay on a GPU host: "
        'actors, sms or cpu (docs/gpu.md, "Stages"); without it, the whole study',
    )
    p.add_argument(
        "--repeats",
        type=number(int, lo=1),
        help="with --stage: runs per configuration (default: actors 2, sms 3 (8 SMs once), cpu 2)",
    )
    p.add_argument(
        "--part",
        type=_part_flag,
        help="with --stage: run part K (K/N: N checked) of a stage that does not fit one stay of --budget-s "
        "(the 20-update jobs of every stage do not fit 420 s): each part a stay with its own idle power and "
        "warm-up, every job and repeat kept, none cut; part 1 writes the parts to --out/stage_plan.json, "
        'later parts run it with --plan-from; the dry run lists them (docs/gpu.md, "Stages")',
    )
    p.add_argument(
        "--plan-from",
        type=Path,
        help="with --part K, K > 1: part 1's --out, whose stage_plan.json every later part runs (the same "
        "frames, split and seeds; nothing re-planned)",
    )
    p.add_argument(
        "--join",
        type=lambda t: [Path(d) for d in t.split(",") if d],
        help="with --stage and --out: DIR1,DIR2,...: the parts' --out folders, summarised as one stage "
        "(per configuration the median (min..max) over every part's runs, and the noise floor); runs nothing",
    )
    p.add_argument(
        "--best-from",
        type=Path,
        help="with --stage sms or cpu: an actors stage's --out, whose summary.json names the best actor count",
    )
    p.add_argument(
        "--actors",
        type=_ints,
        help="the actor sweep (default 4,16,40,128,256; --stage actors: "
        "4,40,128,256; --stage sms or cpu: the one best count)",
    )
    p.add_argument("--sm-limits", type=_sm_limits, default="auto", help="the SM sweep: auto, none or a list")
    p.add_argument(
        "--compare",
        choices=[p for p in PRECISIONS if p != "fp32"] + ["none"],
        default="bf16",
        help="the precision compared with fp32 at the best actor count (default bf16); none",
    )
    p.add_argument("--frames", type=_frames, default="auto", help="the task's frames per job (default auto)")
    p.add_argument(
        "--gpu",
        help=f"dry run on a host without a GPU: the GPU modelled (default: --plan-from's GPU, else {TARGET_GPU})",
    )
    p.add_argument("--host-threads", type=number(int, lo=1), help="dry run: the GPU host's hardware threads")
    p.add_argument("overrides", nargs="*", help="extra job overrides, e.g. env=breakout")
    return p


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The flags as parsed, checked together (one line, exit 2), the folders made absolute."""
    p = parser()
    args = p.parse_args(argv)
    if args.stage:
        stage_flags(p, args)
    if (args.part or args.plan_from) and not args.stage:
        p.error(
            f"--part/--plan-from: allowed: with --stage only (got --part={args.part}, --plan-from={args.plan_from})"
        )
    if not args.stage:
        args.actors = args.actors or (TINY_ACTORS if args.tiny else ACTORS)
    args.compare = None if args.compare == "none" else args.compare
    if args.out is None and not args.dry_run:
        p.error("--out: required (where the store, the report and the summary go); allowed: --out DIR, or --dry-run")
    if args.out is not None and (problem := writable_folder("--out", args.out) or _holds_store(args.out)):
        p.error(problem)
    args.out = args.out and args.out.resolve()  # before main() moves to the clone
    for flag in ("plan_from", "best_from"):
        setattr(args, flag, getattr(args, flag, None) and getattr(args, flag).resolve())
    args.join = args.join and [d.resolve() for d in args.join]
    return args


def stage_flags(p: Parser, args: argparse.Namespace) -> None:
    """The flags a stage reads, checked before anything runs (one line, exit 2)."""
    if args.stage == "actors" and args.repeats == 1 and not args.tiny:
        p.error("--repeats=1: the actors stage runs each actor count at least twice; allowed: an integer >= 2")
    if args.stage != "actors" and args.actors and len(args.actors) != 1:
        p.error(
            f"--actors={','.join(map(str, args.actors))}: --stage {args.stage} runs at the one best actor count; "
            "allowed: one integer >= 1, or --best-from DIR (an actors stage's --out)"
        )
    if args.best_from is not None and (args.stage == "actors" or args.actors):
        p.error(f"--best-from={args.best_from}: allowed: with --stage sms or cpu and without --actors")
    if args.best_from is not None and not (args.best_from / "summary.json").is_file():
        p.error(f"--best-from={args.best_from}: holds no summary.json; allowed: the --out of a finished actors stage")
    for d in args.join or []:
        if not (d / "summary.json").is_file() or not (d / "mlruns" / "mlflow.db").is_file():
            p.error(f"--join: {d} holds no summary.json and mlruns/; allowed: the --out folders of the stage's parts")
    if args.join and (args.part or args.plan_from or args.dry_run or args.out is None):
        p.error("--join: allowed: with --stage and --out only (it summarises parts that ran; it runs nothing)")
    if args.plan_from is not None and not (args.plan_from / PLAN_FILE).is_file():
        p.error(f"--plan-from={args.plan_from}: holds no {PLAN_FILE}; allowed: the --out of the stage's part 1")
    if args.plan_from is not None and (args.actors or args.best_from or not args.part):
        p.error(
            f"--plan-from={args.plan_from}: the plan names its jobs and parts; allowed: with --part K/N and "
            "without --actors or --best-from"
        )
    for flag in ("sm_limits", "frames"):
        if getattr(args, flag) != "auto":
            p.error(f"--{flag.replace('_', '-')}: the stages size these themselves; allowed: without --stage only")
    args.compare = "none"
    args.best_given = args.actors[0] if args.stage != "actors" and args.actors else None
    args.actors = (
        (args.actors or (TINY_ACTORS if args.tiny else list(STAGE_ACTORS))) if args.stage == "actors" else None
    )


def _holds_store(out: Path) -> str | None:
    db = out / "mlruns" / "mlflow.db"
    if db.exists():
        return (
            f"--out={out}: already holds a study's store ({db}); allowed: a new or empty folder "
            "(this run's jobs must not mix with another's)"
        )
    return None


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    """The flags, then the stage (--stage) or the whole study: rlbench/cli/gpu_stage.py, gpu_study.py."""
    t0 = time.monotonic()
    args = parse(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return (gpu_stage if args.stage else gpu_study).main(args, t0)


if __name__ == "__main__":
    sys.exit(main())
