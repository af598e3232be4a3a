"""Actor-path efficiency: rlbench's actors + central inference vs the raw Atari engine.

Both sides use the same engine settings (envs, threads, batch, preprocessing).
  raw:     random actions straight into the engine's send / recv (AtariVectorEnv's, EnvPool's)
  rlbench: ActorRole -> InferenceServer (algo=random: no network) -> unroll assembly in
           R2D2's Atari layout; no learner, the unrolls are dropped (until this session the
           old policy=random also copied them into an R2D2 replay)
They run alternately, `--repeats` times each, for `--seconds` each; the ratio of the
medians is printed last as `actor_path_efficiency=<x>` (target >= 0.9).

With `--procs N` a third side runs in the same alternation: the same job with its envs in N
actor processes over gRPC (actor_procs=N: same envs, same threads split between them), and
the benchmark prints `process_path_ratio=<x>` (its fps over the in-process rlbench path's; the
median of each repeat's ratio; target >= 0.9 at 2 processes), the message bytes per env step on
the wire, the actors' round trip (a Step sent to its Actions back: loopback plus the wait for
central inference) p50/p99, and the driver thread's CPU seconds per env step on both paths with
the env steps/s at which one driver thread would saturate (1 / that: an estimate).

    python pipelines/bench_actor_path.py --actors 40 --repeats 5 --seconds 10
    python pipelines/bench_actor_path.py --actors 40 --repeats 5 --seconds 10 --procs 2

With `--engines ale envpool` each repeat runs both sides on each engine in turn (the order
flipped each repeat): the medians per engine and `envpool_fps_ratio=<x>`, the median of the
repeats' EnvPool / ale-py ratios of the rlbench path's fps (docs/results/engines.md).

    python pipelines/bench_actor_path.py --actors 40 --repeats 3 --seconds 5 --engines ale envpool
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np
import psutil

from rlbench.cli.command import Parser, refuse
from rlbench.config.flags import number
from rlbench.config.rules import ConfigError
from rlbench.envs.vector import make_actors, resolve_inference_batch
from rlbench.prepare.compose import compose_job
from rlbench.prepare.plan import plan_job
from rlbench.train.trainer import build_trainer

PROG = "pipelines/bench_actor_path.py"


def config(args, procs: int = 0, engine: str = "ale"):
    overrides = [
        f"env={args.env}",
        f"env.engine={engine}",
        f"actors={args.actors}",
        f"inference_batch={args.inference_batch}",
        "algo=random",
        "workload.frames=1000000000000",
        f"actor_procs={procs}",
    ]
    if args.threads:
        overrides.append(f"actor_threads={args.threads}")
    return compose_job(overrides)


def idle_share(before, after) -> float | None:
    """The host's idle CPU share (idle + iowait) between two psutil.cpu_times() snapshots; None
    when no time passed. High idle through the processes where the in-process path has none
    means round trips, not CPU, bound the processes (docs/actors.md)."""
    spent = {k: getattr(after, k) - getattr(before, k) for k in after._fields}
    total = sum(spent.values()) - spent.get("guest", 0.0) - spent.get("guest_nice", 0.0)  # in user/nice already
    return (spent["idle"] + spent.get("iowait", 0.0)) / total if total > 0 else None


def raw_engine(conf):
    """The engine under the family's vector env, reset (not timed), and a send-recv of random
    actions on it that returns the env ids stepped."""
    actors = make_actors(conf.env, conf.actors, conf.actor_threads or _threads(), conf.inference_batch, seed=conf.seed)
    rng, pooled = np.random.default_rng(0), hasattr(actors, "_pool")
    env = actors._pool if pooled else actors._env
    if pooled:  # EnvPool: made with the seed; send names the envs
        ids = env.reset()[1]["env_id"]

        def step():
            nonlocal ids
            env.send(rng.integers(0, actors.num_actions, len(ids)).astype(np.int32), ids)
            ids = env.recv()[4]["env_id"]
            return ids

        return env, step
    env.reset(seed=conf.seed)

    def step():  # ale-py's AtariVectorEnv: send() is for the batch the last recv() returned
        env.send(rng.integers(0, actors.num_actions, env.batch_size))
        return env.recv()[4]["env_id"]

    return env, step


def raw_fps(conf, seconds: float, extra: dict | None = None) -> float:
    env, step = raw_engine(conf)
    steps, t0, host0 = 0, time.perf_counter(), psutil.cpu_times()
    while time.perf_counter() - t0 < seconds:
        steps += len(step())
    fps = steps * conf.env.frameskip / (time.perf_counter() - t0)
    if extra is not None:
        extra["host_idle"] = idle_share(host0, psutil.cpu_times())
    env.close()
    return fps


def rlbench_fps(conf, seconds: float, extra: dict | None = None) -> float:
    """The rlbench actor path's fps; `extra` gets the driver thread's CPU per env step and, with
    actor processes, the wire's bytes per env step and the actors' last round-trip report."""
    trainer = build_trainer(plan_job(conf))
    stop = threading.Event()
    role = trainer.actors
    host: list = []  # the host's CPU times when stepping starts and when it is stopped
    watcher = threading.Thread(target=_stop_after_stepping, args=(role, stop, seconds, host))
    watcher.start()
    started, cpu0 = time.perf_counter(), time.thread_time()
    role.run(stop)
    end, cpu = time.perf_counter(), time.thread_time() - cpu0
    fps = role.frames / (end - role.stepping_since)  # stepping only: the first reset is not timed on either side
    watcher.join()
    run_wall = end - started  # the shares are of the whole run: env_step includes that first reset
    ops = {**role.timer.fractions(run_wall), **trainer.inference.timer.fractions(run_wall)}
    print("  rlbench path time shares: " + ", ".join(f"{k} {v:.1%}" for k, v in ops.items()), flush=True)
    if extra is not None:
        extra["host_idle"] = idle_share(*host) if len(host) == 2 else None
        env_steps = role.steps + role.eval_steps
        extra["driver_cpu_us_per_step"] = 1e6 * cpu / max(env_steps, 1)
        remote = getattr(trainer.env, "remote", None)
        if remote is not None:
            wire = remote.wire_bytes()
            extra["bytes_per_step"] = (wire["received"] + wire["sent"]) / max(wire["env_steps"], 1)
            reports = [a["report"] for a in remote.actors() if a["report"] is not None]
            extra["rtt_ms"] = [(r.rtt_p50_ms, r.rtt_p99_ms) for r in reports]
    trainer.close()
    return fps


def _stop_after_stepping(role, stop: threading.Event, seconds: float, host: list) -> None:
    while role.stepping_since is None and not stop.wait(0.01):
        pass
    host.append(psutil.cpu_times())
    stop.wait(seconds)
    host.append(psutil.cpu_times())
    stop.set()


def _threads() -> int:
    import os

    return os.cpu_count() or 1


def _parser() -> Parser:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="pong")
    p.add_argument("--actors", type=number(int, lo=1), default=40)
    p.add_argument(
        "--threads",
        type=number(int, lo=0, note="0 = all hardware threads"),
        default=0,
        help="actor threads; 0 = all hardware threads",
    )
    p.add_argument("--inference-batch", type=number(int, lo=-1), default=0)
    p.add_argument("--seconds", type=number(float, lo=0, lo_open=True), default=10.0)
    p.add_argument("--repeats", type=number(int, lo=1), default=5)
    p.add_argument(
        "--procs",
        type=number(int, lo=0, note="0 = no process path"),
        default=0,
        help="also run the path with its envs in N actor processes over gRPC (0: not)",
    )
    p.add_argument("--engines", choices=("ale", "envpool"), nargs="+", default=["ale"], help="Atari engines")
    return p


def _repeat(i: int, engine: str, confs: tuple, seconds: float, runs: dict) -> None:
    """One repeat of each side on `engine`, appended to runs[engine]."""
    conf, procs = confs
    got = runs.setdefault(engine, {"raw": [], "ours": [], "remote": [], "extras": []})
    extra = {"raw": {}, "inproc": {}, "procs": {}}
    got["extras"].append(extra)
    got["raw"].append(raw_fps(conf, seconds, extra["raw"]))
    got["ours"].append(rlbench_fps(conf, seconds, extra["inproc"]))
    line = f"repeat {i + 1}, {engine}: raw {got['raw'][-1]:.0f} fps, rlbench {got['ours'][-1]:.0f} fps"
    if procs is not None:
        got["remote"].append(rlbench_fps(procs, seconds, extra["procs"]))
        line += f", rlbench with {procs.actor_procs} actor processes {got['remote'][-1]:.0f} fps"
    print(line, flush=True)


def _summary(engine: str, conf, got: dict, procs: int) -> None:
    r, o = statistics.median(got["raw"]), statistics.median(got["ours"])
    print(
        f"{engine}: median raw engine fps={r:.0f}  median rlbench actor path fps={o:.0f}  "
        f"(actors={conf.actors}, threads={conf.actor_threads or _threads()}, "
        f"batch={resolve_inference_batch(conf.inference_batch, conf.actors)})"
    )
    _print_idle(got["extras"], procs)
    if procs:
        _print_process_path(procs, got["ours"], got["remote"], got["extras"])
    print(f"actor_path_efficiency{'' if engine == 'ale' else '_' + engine}={o / r:.3f}")


def main() -> None:
    args = _parser().parse_args()
    engines = list(dict.fromkeys(args.engines))
    try:
        confs = {e: (config(args, 0, e), config(args, args.procs, e) if args.procs else None) for e in engines}
    except ConfigError as e:
        refuse(PROG, f"{e} (no run started)")
    runs: dict = {}
    for i in range(args.repeats):
        for engine in engines if i % 2 == 0 else engines[::-1]:
            _repeat(i, engine, confs[engine], args.seconds, runs)
    for engine in engines:
        _summary(engine, confs[engine][0], runs[engine], args.procs)
    if len(engines) == 2:
        ratios = [p / a for p, a in zip(runs["envpool"]["ours"], runs["ale"]["ours"], strict=True)]
        print(f"envpool_fps_ratios={', '.join(f'{x:.3f}' for x in ratios)}")
        print(f"envpool_fps_ratio={statistics.median(ratios):.3f}")


def _print_idle(extras: list[dict], procs: int) -> None:
    sides = [("raw", "raw"), ("inproc", "in-process")] + ([("procs", f"{procs} actor processes")] if procs else [])
    shares = []
    for key, name in sides:
        known = [e[key]["host_idle"] for e in extras if e[key].get("host_idle") is not None]
        shares.append(f"{name} {statistics.median(known):.1%}" if known else f"{name} unknown (no CPU times)")
    print("host CPU idle while stepping (median; psutil): " + ", ".join(shares))


def _print_process_path(procs: int, ours: list[float], remote: list[float], extras: list[dict]) -> None:
    med = statistics.median
    ratio = med(p / q for p, q in zip(remote, ours, strict=True))
    cpu_in = med(e["inproc"]["driver_cpu_us_per_step"] for e in extras)
    cpu_pr = med(e["procs"]["driver_cpu_us_per_step"] for e in extras)
    rtts = [rt for e in extras for rt in e["procs"].get("rtt_ms", [])]
    print(
        f"median rlbench fps with {procs} actor processes={med(remote):.0f} (in-process {med(ours):.0f}); "
        f"ratio of medians {med(remote) / med(ours):.3f}"
    )
    print(
        f"wire: {med(e['procs']['bytes_per_step'] for e in extras):.0f} message bytes per env step (both ways); "
        "actors' round trip (Step to Actions, incl. the wait for inference) "
        + (
            f"p50 {med(r[0] for r in rtts):.1f} ms, p99 {med(r[1] for r in rtts):.1f} ms"
            if rtts
            else "not reported (runs shorter than the actors' 5 s report period)"
        )
    )
    print(
        f"driver thread CPU per env step: in-process {cpu_in:.1f} us, with actor processes {cpu_pr:.1f} us; "
        f"one driver thread would saturate at about {1e6 / cpu_in:.0f} env steps/s in-process and "
        f"{1e6 / cpu_pr:.0f} with processes (estimate: 1 / its CPU per step)"
    )
    print(f"process_path_ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
