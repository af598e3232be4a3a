"""`python -m rlbench.profile [options] [overrides]`: measure this host's cost curves for the
pipeline model (rlbench/predict/) and log them as an MLflow run (tag `rlbench.role=profile`).

Overrides pick the workload as for a job (`env=breakout`, `algo=vtrace`). What it measures
and logs: docs/predict.md, "The profile".
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rlbench.cli.command import Parser, command
from rlbench.config.flags import number
from rlbench.core.errors import Refusal
from rlbench.core.precision import Amp
from rlbench.core.resources import ComputeLimit, resolve_device, usable_cpus
from rlbench.core.signals import sigterm_raises, stopped
from rlbench.predict import measure as measures  # measures.gemm_peak: tests replace it with a small GEMM
from rlbench.predict.measure import corun, env_curve, fit_inference, inference_curve, update_time
from rlbench.predict.rpc import ROW_KEYS, fit_rpc, rpc_cost
from rlbench.prepare.compose import compose_job
from rlbench.prepare.preflight import PreflightError, check, masked
from rlbench.telemetry.charts.layout import tight_layout

PROG = "rlbench.profile"  # the refusals' prefix: `rlbench.profile: --flag=value: ... allowed: ...`


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: allowed: comma-separated integers >= 1, e.g. 1,2") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text}: allowed: comma-separated integers >= 1, e.g. 1,2")
    return values


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--threads",
        type=_ints,
        default=None,
        help="actor threads to step envs with (default 1, half and all of this host's usable CPUs)",
    )
    p.add_argument(
        "--envs",
        type=_ints,
        default=[4, 16, 64, 256],
        help="env counts (default 4,16,64,256: the study's actor sweep spans 4..256)",
    )
    p.add_argument(
        "--batches", type=_ints, default=[4, 16, 64, 256], help="inference batch sizes (default 4,16,64,256)"
    )
    p.add_argument(
        "--units",
        type=_ints,
        default=None,
        help="compute units: SMs on CUDA, threads on CPU (default "
        "on CPU 1, half and all threads; on CUDA a quarter, half "
        "and all SMs)",
    )
    p.add_argument(
        "--seconds",
        type=number(float, lo=0, lo_open=True),
        default=2.0,
        help="seconds per env-stepping point (default 2)",
    )
    p.add_argument("--repeats", type=number(int, lo=1), default=10, help="timed inference calls per point (default 10)")
    p.add_argument(
        "--updates",
        type=number(int, lo=0),
        default=2,
        help="timed learner updates per unit count (default 2); 0 = none",
    )
    p.add_argument(
        "--corun-envs",
        type=number(int, lo=0),
        default=40,
        help="envs of the co-run (the actor loop alone and beside the learner, per unit count); 0 = none",
    )
    p.add_argument(
        "--rpc-frames",
        type=_ints,
        default=[1, 16],
        help="envs per actor process (frames per message) "
        "at which the actor protocol's cost is measured (default 1,16: a line per message and per env)",
    )
    p.add_argument(
        "--rpc-seconds",
        type=number(float, lo=0),
        default=1.5,
        help="seconds of messages per --rpc-frames point (default 1.5); 0 = not measured",
    )
    p.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlruns/mlflow.db")
    p.add_argument("--experiment", default="rlbench-profiles")
    p.add_argument("--no-log", action="store_true", help="print only; log nothing to MLflow")
    p.add_argument("overrides", nargs="*", help="job overrides picking the env and algorithm, e.g. env=cartpole")
    args = p.parse_args(argv)
    if not args.experiment.strip():
        p.error(f"--experiment={args.experiment!r}: allowed: a non-empty MLflow experiment name")
    return args


def measure(conf, args) -> dict:
    """The curves, inference and the learner at the job's precision (`precision=bf16`; tf32's
    flags set while they are measured), and the device's GEMM peak at it."""

    with Amp(conf.precision, resolve_device(conf.device).type).scope():
        return _measure(conf, args)


def _measure(conf, args) -> dict:
    peak = measures.gemm_peak(conf.precision, resolve_device(conf.device))
    env = env_curve(conf.env, [(t, e) for t in args.threads for e in args.envs], args.seconds, conf.seed)
    inference = inference_curve(conf, args.batches, args.units, args.repeats)
    fit = fit_inference(inference) if len(set(args.batches)) > 1 else {}
    power: list[dict] = []
    updates = [update_time(conf, u, args.updates, power) for u in args.units] if args.updates else []
    co = (
        [corun(conf, args.corun_envs, max(args.threads), u, args.seconds, args.updates, power) for u in args.units]
        if args.updates and args.corun_envs
        else []
    )
    rpc = rpc_rows(conf, args)
    return {
        "env": env,
        "inference": inference,
        "fit": fit,
        "update": updates,
        "corun": co,
        "power": power,
        "peak": peak,
        "rpc": rpc,
    }


def rpc_rows(conf, args) -> list[dict]:
    """The actor protocol's cost (rlbench/predict/rpc.py), or one row of nulls saying why not."""

    if not args.rpc_seconds:
        return [{k: None for k in ROW_KEYS} | {"reason": "not measured (--rpc-seconds 0)"}]
    return rpc_cost(conf.env, args.rpc_frames, args.rpc_seconds)


def rpc_metrics(rows: list[dict]) -> tuple[dict[str, float], dict[str, str]]:
    """The profile run's metrics of the actor protocol (docs/metrics.md, "Profile runs"): the
    fitted CPU per message and per env of each side, message bytes per env step at the largest
    size measured, the loopback round trip and an actor process's start; a value that could not
    be measured is absent and the tag `rpc_unmeasured` says why (never a zero)."""

    fit = fit_rpc(rows) or {}
    m = {}
    for key, name in (("actor_cpu_s", "rpc_actor"), ("server_cpu_s", "rpc_server")):
        if key in fit:
            m |= {f"{name}_us_per_msg": 1e6 * fit[key][0], f"{name}_us_per_env": 1e6 * fit[key][1]}
    big = max((r for r in rows if r.get("bytes_up") is not None), key=lambda r: r["frames"], default=None)
    if big is not None:
        m["wire_bytes_per_step"] = (big["bytes_up"] + big["bytes_down"]) / big["frames"]
    rtts = [r["rtt_p50_ms"] for r in rows if r.get("rtt_p50_ms") is not None]
    starts = [r["start_s"] for r in rows if r.get("start_s") is not None]
    m |= {"rpc_rtt_ms": min(rtts)} if rtts else {}
    m |= {"actor_start_s": max(starts)} if starts else {}
    why = "; ".join(dict.fromkeys(r["reason"] for r in rows if r.get("reason")))
    return m, ({"rpc_unmeasured": why} if why else {})


def figure(curves: dict, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: keeps matplotlib off the start
    from matplotlib.figure import Figure  # lazy: keeps matplotlib off the start

    fig = Figure(figsize=(17, 4))
    FigureCanvasAgg(fig)
    ax_env, ax_inf, ax_upd, ax_co = fig.subplots(1, 4)
    for t in sorted({r["threads"] for r in curves["env"]}):
        pts = sorted((r["envs"], r["sps"]) for r in curves["env"] if r["threads"] == t)
        ax_env.plot(*zip(*pts, strict=True), marker="o", label=f"{t} actor threads")
    ax_env.set(xlabel="envs", ylabel="agent steps / s", title="env stepping")
    for u in sorted({r["units"] for r in curves["inference"]}):
        pts = sorted((r["batch"], 1e3 * r["seconds"]) for r in curves["inference"] if r["units"] == u)
        ax_inf.plot(*zip(*pts, strict=True), marker="o", label=f"{u} units")
    ax_inf.set(xlabel="batch (envs)", ylabel="ms per call", title="central inference")
    if curves["update"]:
        ax_upd.plot([r["units"] for r in curves["update"]], [r["seconds"] for r in curves["update"]], marker="o")
    else:
        ax_upd.text(0.5, 0.5, "not measured (--updates 0)", ha="center", va="center", transform=ax_upd.transAxes)
    ax_upd.set(xlabel="compute units", ylabel="s per update", title="learner update")
    if curves.get("corun"):
        rows = curves["corun"]
        xs = range(len(rows))
        ax_co.bar([x - 0.2 for x in xs], [r["loop_sps"] for r in rows], 0.4, label="actor loop alone")
        ax_co.bar([x + 0.2 for x in xs], [r["corun_sps"] for r in rows], 0.4, label="beside the learner")
        ax_co.set_xticks(list(xs), [f"{r['units']} units\n{r['envs']} envs" for r in rows])
        ax_co.legend(fontsize=8)
    else:
        ax_co.text(
            0.5,
            0.5,
            "not measured (--updates 0 or --corun-envs 0)",
            ha="center",
            va="center",
            transform=ax_co.transAxes,
        )
    ax_co.set(ylabel="agent steps / s", title="co-run: actors beside the learner")
    for ax in (ax_env, ax_inf):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax_upd.grid(alpha=0.3)
    tight_layout(fig)
    fig.savefig(path, dpi=90)
    return path


def log_profile(conf, args, curves: dict) -> str:
    """The profile as a run of its own in --experiment (rlbench/tracking/profiles.py); its id."""
    from rlbench.tracking.peaks import peak_metric  # lazy: keeps mlflow, torch off the start
    from rlbench.tracking.profiles import TABLES, write_profile  # lazy: keeps mlflow, torch off the start

    device = resolve_device(conf.device)
    tags = {
        "env_id": conf.env.id,
        "device": conf.device,
        "profile_device": device.type,
        "compute_units_total": str(ComputeLimit(None, device).grant.total),
    }
    params = {
        "algo.name": conf.algo.name,
        "env.id": conf.env.id,
        "threads": args.threads,
        "envs": args.envs,
        "batches": args.batches,
        "units": args.units,
        "precision": conf.precision,
    }
    metrics = {peak_metric(conf.precision): curves["peak"]["tflops"]}
    rpc, why = rpc_metrics(curves["rpc"])
    metrics |= rpc
    tags |= why
    for u, (fixed, per_env) in curves["fit"].items():
        metrics |= {f"inference_fixed_ms/{u}": 1e3 * fixed, f"inference_per_env_ms/{u}": 1e3 * per_env}
    tracking = type(conf.tracking)(uri=args.tracking_uri, experiment=args.experiment)
    with tempfile.TemporaryDirectory() as tmp:
        return write_profile(
            tracking,
            f"profile {conf.env.id} {conf.algo.name} {conf.precision}",
            tags,
            params,
            {name: curves[name] for name in TABLES},
            metrics,
            [figure(curves, Path(tmp) / "profile.png")],
        )


def _default_counts(conf, args) -> str | None:
    """--threads and --units left out: spread over this host (its CPUs; its device's units).
    Returns what this host cannot honour, or None."""

    cpus = len(usable_cpus())
    if args.threads is None:
        args.threads = sorted({1, max(1, cpus // 2), cpus})
    if args.units is None:
        device = resolve_device(conf.device)
        total = ComputeLimit(None, device).grant.total
        args.units = sorted(
            {1, max(1, total // 2), total} if device.type == "cpu" else {max(1, total // 4), max(1, total // 2), total}
        )
    total = ComputeLimit(None, resolve_device(conf.device)).grant.total
    if max(args.threads) > cpus or max(args.units) > total:
        return (
            f"--threads={args.threads} --units={args.units}: allowed: threads in 1..{cpus} (this host's usable "
            f"CPUs), units in 1..{total} (its {'SMs' if resolve_device(conf.device).type == 'cuda' else 'CPU threads'})"
        )
    return None


@command(PROG)
def main(argv: list[str] | None = None) -> int:
    """The command; a SIGTERM or Ctrl-C ends it with one line and 128 + the signal
    (rlbench/core/signals.py), its profile run, if one was being logged, KILLED."""

    try:
        with sigterm_raises():
            return _main(argv)
    except KeyboardInterrupt as e:
        return stopped(e, PROG)


def _main(argv: list[str] | None) -> int:
    args = parse(argv)
    conf = compose_job(args.overrides)  # ConfigError: a refusal, exit 2
    problem = _default_counts(conf, args)
    if not problem and not args.no_log:  # the store must answer before minutes of measuring, not after
        try:
            check(args.tracking_uri)
        except PreflightError as e:
            problem = f"--tracking-uri={masked(args.tracking_uri)}: {e}"
    if problem:
        raise Refusal(problem)
    curves = measure(conf, args)
    peak = curves["peak"]
    print(
        f"peak at precision={peak['precision']}: {peak['tflops']:.3f} TFLOP/s (the best of {peak['n']}x{peak['n']} "
        f"GEMMs, {1e3 * peak['seconds']:.1f} ms)"
    )
    for r in curves["env"]:
        print(
            f"env stepping: {r['threads']} threads x {r['envs']} envs: {r['sps']:.0f} steps/s "
            f"({1e3 * r['env_step_s']:.3f} ms per env step)"
        )
    for u, (fixed, per_env) in curves["fit"].items():
        print(f"central inference at {u} units: {1e3 * fixed:.2f} ms + {1e3 * per_env:.3f} ms per env")
    for r in curves["update"]:
        print(f"learner update at {r['units']} units: {r['seconds']:.2f} s (the first: {r['first_s']:.2f} s)")
    for r in curves["power"]:
        watts = [f"{k} {r[f'power_{k}_w']:.1f} W" for k in ("cpu", "gpu") if r[f"power_{k}_w"] is not None]
        print(f"power, {r['state']} at {r['units']} units: " + ", ".join(watts or ["not measured"]))
    why = {f"{k}: {r[f'{k}_reason']}" for r in curves["power"] for k in ("cpu", "gpu") if r[f"power_{k}_w"] is None}
    if why:
        print("power not measured: " + "; ".join(sorted(why)))
    for r in curves["corun"]:
        print(
            f"co-run at {r['units']} units, {r['envs']} envs on {r['threads']} threads: actor loop {r['loop_sps']:.0f} "
            f"steps/s alone, {r['corun_sps']:.0f} beside the learner; an update beside the actors "
            f"{r['corun_update_s']:.2f} s"
        )
    for r in curves["rpc"]:
        if r.get("server_cpu_s") is None:
            print(f"actor protocol: not measured: {r['reason']}")
            continue
        actor = f"{1e6 * r['actor_cpu_s']:.0f} us" if r["actor_cpu_s"] is not None else f"not measured ({r['reason']})"
        rtt = f"{r['rtt_p50_ms']:.2f} ms" if r["rtt_p50_ms"] is not None else "not reported"
        print(
            f"actor protocol, {r['frames']} envs per message ({r['messages']} messages): CPU per message: actor "
            f"{actor}, server {1e6 * r['server_cpu_s']:.0f} us; {r['bytes_up']:.0f} bytes up, {r['bytes_down']:.0f} "
            f"down; round trip p50 {rtt}; the process joined after {r['start_s']:.1f} s"
        )
    if not args.no_log:
        print(f"profile logged as run {log_profile(conf, args, curves)} in experiment {args.experiment}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
