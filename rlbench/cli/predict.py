"""`python -m rlbench.predict`: predicted fps, learner updates/s, runtime_s and the bound of a
configuration from a profile (rlbench.profile), a grid of them with the recommended CPU/GPU
ratio, what-if machines, and the model's error on a real sweep (docs/predict.md)."""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import re
import socket
import tempfile
import time
from argparse import RawDescriptionHelpFormatter as RawDescription
from pathlib import Path

from rlbench.cli.command import Parser, command
from rlbench.config.flags import existing_store, number, writable_folder
from rlbench.core.errors import Refusal
from rlbench.predict.accuracy import check_jobs, prediction_error
from rlbench.predict.curves import ProfileError, load_profile
from rlbench.predict.jobs import Machine, predict_job
from rlbench.predict.model import Link
from rlbench.predict.report import (
    VALIDATION_HEADER,
    grid_columns,
    grid_figure,
    recommend,
    saturation,
    table,
    validation_figure,
    validation_rows,
)
from rlbench.prepare.compose import compose_job
from rlbench.prepare.preflight import check

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
PROFILES = "rlbench-profiles"


PROG = "rlbench.predict"  # the refusals' prefix: `rlbench.predict: --flag=value: ... allowed: ...`
BITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}  # tc's rate units (decimal)
SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


def link(text: str):
    """`--link BANDWIDTH,LATENCY` (e.g. 10gbit,0.1ms; one-way latency): a model.Link."""

    allowed = (
        f"{text}: allowed: BANDWIDTH,LATENCY, a rate in {'/'.join(BITS)} and a one-way latency in "
        f"{'/'.join(SECONDS)}, both finite, the rate > 0, e.g. 10gbit,0.1ms"
    )
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([a-z]+)\s*,\s*([0-9.eE+-]+)\s*([a-z]+)\s*", text.lower())
    if not m or m.group(2) not in BITS or m.group(4) not in SECONDS:
        raise argparse.ArgumentTypeError(allowed)
    try:
        rate, latency = float(m.group(1)) * BITS[m.group(2)], float(m.group(3)) * SECONDS[m.group(4)]
    except ValueError:
        raise argparse.ArgumentTypeError(allowed) from None
    if not (0 < rate < float("inf") and 0 <= latency < float("inf")):
        raise argparse.ArgumentTypeError(allowed)
    return Link(rate, latency)


def parse(argv: list[str] | None):
    p = Parser(
        prog=PROG,
        description=__doc__,
        epilog="examples:\n  python -m rlbench.predict actors=40 sm_limit=1\n"
        "  python -m rlbench.predict --grid actors=4,40,256 actor_threads=1,2 sm_limit=1,2\n"
        "  python -m rlbench.predict actor_hosts=8 --link 10gbit,0.1ms\n"
        "  python -m rlbench.predict --grid actor_hosts=1,2,4,8,16 --link 10gbit,0.1ms\n"
        "  python -m rlbench.predict --validate --sweep <parent run id>",
        formatter_class=RawDescription,
    )
    p.add_argument("--profile", metavar="RUN_ID", help="profile run (default: the newest of this host and env)")
    p.add_argument(
        "--cpu-profile", metavar="RUN_ID", help="what-if: the actor side (env stepping, cores) from this profile"
    )
    p.add_argument("--gpu-profile", metavar="RUN_ID", help="what-if: inference and the learner from this profile")
    p.add_argument(
        "--threads",
        type=number(int, lo=1),
        help="what-if: the actor host has N hardware threads (an estimate: "
        "stepping assumed to scale linearly with threads)",
    )
    p.add_argument(
        "--link",
        type=link,
        help="actor_hosts: the network between them and the learner's host, "
        "BANDWIDTH,LATENCY (one way), e.g. 10gbit,0.1ms (an estimate)",
    )
    p.add_argument(
        "--actor-host-cpus",
        type=number(int, lo=1),
        help="actor_hosts: an actor host's hardware threads (default: the profile's host's, an assumption)",
    )
    p.add_argument(
        "--grid",
        action="store_true",
        help="comma lists in the overrides expand to a grid: a table, a figure and the recommended ratio",
    )
    p.add_argument(
        "--validate", action="store_true", help="predict every finished job of --sweep and measure the error"
    )
    p.add_argument("--sweep", metavar="RUN_ID", help="with --validate: a sweep's parent run id")
    p.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI)
    p.add_argument(
        "--profiles-experiment", default=PROFILES, help=f"where profiles are looked for (default {PROFILES})"
    )
    p.add_argument(
        "--out", type=Path, default=None, help="--grid: folder for grid.csv and grid.png (default predictions/)"
    )
    p.add_argument("--no-log", action="store_true", help="--validate: print only, log nothing on the sweep's parent")
    p.add_argument("overrides", nargs="*", help="job overrides, e.g. actors=40 sm_limit=1 env=pong")
    a = p.parse_args(argv)
    if a.validate != bool(a.sweep):
        p.error("--validate and --sweep go together: --validate --sweep <parent run id>")
    if a.validate and (
        a.grid or a.overrides or a.threads or a.cpu_profile or a.gpu_profile or a.link or a.actor_host_cpus
    ):
        p.error(
            "--validate predicts the sweep's own jobs on their own host: allowed with it: --profile, "
            "--tracking-uri, --no-log"
        )
    if a.profile and (a.cpu_profile or a.gpu_profile):
        p.error("--profile or --cpu-profile/--gpu-profile, not both")
    lists = [o for o in a.overrides if "," in o.split("=", 1)[-1]]
    if lists and not a.grid:
        p.error(f"{lists[0]}: a list of values needs --grid; allowed without it: one value per key")
    problem = writable_folder("--out", a.out) if a.grid and a.out is not None else None
    if problem:
        p.error(problem)
    return a


def store_problem(a) -> str | None:
    """The store predict reads profiles (and a sweep) from must exist: reading creates an empty one."""

    return existing_store("--tracking-uri", a.tracking_uri, "; a profile of this host first: python -m rlbench.profile")


def grid_overrides(overrides: list[str]) -> list[list[str]]:
    """Every combination of the comma lists: ["actors=4,40", "sm_limit=1"] -> 2 override lists."""
    choices = []
    for o in overrides:
        key, _, value = o.partition("=")
        choices.append([f"{key}={v.strip()}" for v in value.split(",")] if "," in value else [o])
    return [list(c) for c in itertools.product(*choices)]


def compose(overrides: list[str]):
    """The job's validated config, for a machine that need not be this one (no host checks)."""

    return compose_job(overrides, host=False)


def machine(a, host: str, env_id: str, algo: str, precision: str = "fp32"):
    """The profiles named on the command line, else the newest profile of `host`, `env_id`, `algo`
    measured at `precision` (inference and the learner: `python -m rlbench.profile precision=bf16`)."""
    from rlbench.tracking.profiles import profile_runs  # lazy: keeps mlflow, torch off the start

    if a.cpu_profile or a.gpu_profile:
        if not (a.cpu_profile and a.gpu_profile):
            raise ProfileError("--cpu-profile and --gpu-profile go together (a what-if combines both)")
        return Machine(load_profile(a.cpu_profile), load_profile(a.gpu_profile), a.threads, *network(a))
    if a.profile:
        p = load_profile(a.profile)
    else:
        found = profile_runs(host, env_id, algo, a.profiles_experiment, precision)
        if not found:
            raise ProfileError(
                f"no profile of host {host!r} for env {env_id!r}, algo {algo!r} and precision "
                f"{precision!r} in experiment {a.profiles_experiment!r} at {a.tracking_uri}; make one "
                f"on that host: python -m rlbench.profile env=<env> algo=<algo> precision={precision} "
                f"(or name one: --profile <run id>)"
            )
        p = load_profile(found[0])
    return Machine(p, p, a.threads, *network(a))


def network(a) -> tuple:
    """(link, actor host CPUs) from the command line (None where not given; --validate has neither)."""
    return getattr(a, "link", None), getattr(a, "actor_host_cpus", None)


def show(pred, frames: int) -> list[str]:
    ups = "n/a (no learner)" if pred.learner_updates_per_s is None else f"{pred.learner_updates_per_s:.3f}"
    lines = [
        f"  {' '.join(f'{k}={v}' for k, v in pred.knobs.items())}  (cpu_gpu_ratio={pred.cpu_gpu_ratio:g})",
        (
            f"  fps={pred.fps:.0f}  learner_updates_per_s={ups}  runtime_s={pred.runtime_s:.1f}  "
            f"(task: {frames} frames, {pred.learner_updates} updates; actors done at {pred.actors_s:.1f} s)"
        ),
        f"  bound: {pred.bound}" + (f" (the actors by {pred.actor_bound})" if pred.bound != pred.actor_bound else ""),
        (
            f"  energy_per_task_j={pred.energy_per_task_j:.0f} J ({pred.energy_reason})"
            if pred.energy_per_task_j is not None
            else f"  energy_per_task_j: {pred.energy_reason}"
        ),
    ]
    return lines + [f"  {n}" for n in dict.fromkeys(pred.notes)]


def machines(a, host: str, confs) -> dict:
    """precision -> the Machine its configurations are predicted on (a profile per precision)."""
    return {
        p: machine(a, host, confs[0].env.id, confs[0].algo.name, p) for p in dict.fromkeys(c.precision for c in confs)
    }


def names(ms: dict) -> str:
    return "; ".join(f"{m.names()}" + (f" ({p})" if len(ms) > 1 else "") for p, m in ms.items())


def run_grid(a, confs, ms: dict) -> int:
    m = next(iter(ms.values()))
    preds = [predict_job(c, ms[c.precision]) for c in confs]
    print(
        f"predicted with {names(ms)} — a model's predictions, not measurements "
        f"(task: {confs[0].workload.frames} frames):"
    )
    columns = grid_columns(preds)
    rows = [[p.row().get(k) for k in columns] for p in preds]
    print(table(list(columns), rows))
    for n in dict.fromkeys(n for p in preds for n in p.notes):
        print(f"  {n}")
    best = recommend(preds)
    with_energy = [p for p in preds if p.energy_per_task_j is not None]
    if with_energy:
        low = min(with_energy, key=lambda p: p.energy_per_task_j)
        print(
            f"least energy per task: cpu_gpu_ratio={low.cpu_gpu_ratio:g} ("
            + " ".join(f"{k}={v}" for k, v in low.knobs.items())
            + f"): {low.energy_per_task_j:.0f} J ({low.energy_reason})"
        )
    else:
        print(f"energy_per_task_j: {preds[0].energy_reason}")
    print(
        f"recommended: cpu_gpu_ratio={best.cpu_gpu_ratio:g} ("
        + " ".join(f"{k}={v}" for k, v in best.knobs.items())
        + f"): the task in {best.runtime_s:.1f} s at {best.fps:.0f} fps (predicted; bound: {best.bound})"
    )
    line = saturation(preds)
    if line:
        print(line)
    out = a.out or Path("predictions") / time.strftime("%Y-%m-%d_%H-%M-%S")
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "grid.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(rows)
    grid_figure(preds, best, names(ms) if len(ms) > 1 else m.names(), out / "grid.png")
    print(f"wrote {out / 'grid.csv'} and {out / 'grid.png'}")
    return 0


def run_validate(a) -> int:
    from rlbench.tracking.readers import NoSuchRun  # lazy: keeps mlflow off the start
    from rlbench.tracking.study_records import load_parent  # lazy: keeps mlflow off the start

    try:
        study = load_parent(a.sweep)
    except NoSuchRun as e:
        raise LookupError(f"--sweep {a.sweep}: no such run at {e.uri} ({e.detail[:200]})") from None
    if not study.jobs and not study.missing:
        raise LookupError(
            f"--sweep {a.sweep}: run '{study.title}' is not a sweep's parent (it has no child runs: a "
            "single job's run?); give a sweep's parent run id (the sweep prints it: "
            "'[rlbench sweep] parent run <id>')"
        )
    finished = study.finished
    if not finished:
        raise LookupError(f"--sweep {a.sweep}: no finished job to compare ({len(study.jobs)} runs)")
    by_precision: dict[str, list] = {}  # a precision sweep: each precision's jobs from its own profile
    for j in study.jobs:
        by_precision.setdefault(j.params.get("precision", "fp32"), []).append(j)
    ms = {
        p: machine(a, study.host.get("host"), finished[0].params.get("env.id"), finished[0].params.get("algo.name"), p)
        for p in by_precision
        if any(j.finished for j in by_precision[p])
    }
    checked = [c for p, m in ms.items() for c in check_jobs(by_precision[p], m)]
    error, per = prediction_error(checked)
    print(f"sweep {study.title} ({a.sweep}); predicted with {names(ms)}")
    print(table(VALIDATION_HEADER, validation_rows(checked)))
    worst = max(checked, key=lambda c: max(c.ape("fps"), c.ape("runtime_s")))
    print(
        f"worst: {worst.name} (fps off by {worst.ape('fps'):.0%}, runtime_s by {worst.ape('runtime_s'):.0%}; "
        f"predicted bound: {worst.predicted.bound})"
    )
    for n in dict.fromkeys(n for c in checked for n in c.predicted.notes):
        print(f"  {n}")
    print(
        f"median absolute % error: fps {per['fps']:.4f}, runtime_s {per['runtime_s']:.4f} "
        f"over {len(checked)} finished jobs"
    )
    if not a.no_log:
        log_validation(a.sweep, checked, ms, error, per, names(ms))
        print("logged on the sweep's parent run: prediction_error, prediction/predicted_vs_measured.png")
    print(f"prediction_error={error:.4f}")
    return 0


def log_validation(sweep: str, checked: list, ms: dict, error: float, per: dict[str, float], used: str) -> None:
    """The model's error on the sweep's parent run: metrics, the profile's tags, the table and figure."""

    from rlbench.tracking.parent import parent_run  # lazy: keeps mlflow, torch off the start

    parent = parent_run(sweep)
    parent.log_metrics({"prediction_error": error} | {f"prediction_mdape/{k}": v for k, v in per.items()})
    # one profile: the report uses it again; one per precision: the report takes each precision's
    # (prediction_profile_runs), and no single run is named for all of them
    ids = {p: m.gpu.run_id for p, m in ms.items()}
    parent.set_tags(
        {
            "prediction_profile": used,
            "prediction_profile_run": next(iter(ids.values())) if len(ids) == 1 else "",
            "prediction_profile_runs": ",".join(f"{p}={r}" for p, r in ids.items()),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        with open(Path(tmp) / "validation.csv", "w", newline="") as f:
            csv.writer(f).writerows([VALIDATION_HEADER, *validation_rows(checked)])
        validation_figure(checked, used, error, Path(tmp) / "predicted_vs_measured.png")
        parent.log_folder(Path(tmp), "prediction")


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    from rlbench.tracking.store import use_store  # lazy: keeps mlflow off the start

    a = parse(argv)
    try:
        confs = [] if a.validate else [compose(o) for o in grid_overrides(a.overrides)]
        problem = store_problem(a)
        if problem:
            raise LookupError(problem)
        check(a.tracking_uri, key="--tracking-uri", reading=True)
        use_store(a.tracking_uri)
        if a.validate:
            return run_validate(a)
        if a.grid:
            return run_grid(a, confs, machines(a, socket.gethostname(), confs))
        m = machine(a, socket.gethostname(), confs[0].env.id, confs[0].algo.name, confs[0].precision)

        pred = predict_job(confs[0], m)
    except (ProfileError, ValueError, LookupError) as e:  # ConfigError is a ValueError
        raise Refusal(str(e)) from e
    print(f"predicted with {m.names()} — a model's prediction, not a measurement:")
    print("\n".join(show(pred, confs[0].workload.frames)))
    return 0
