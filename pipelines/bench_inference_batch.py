"""Central inference batching: lock-step (inference_batch=0) vs SEED RL's auto rule (-1).

The actor path of a real R2D2 job with `learner=false`: Pong's AtariVectorEnv, central
inference with R2D2's network forward, unroll assembly, initial priorities and replay inserts
(rlbench's ActorRole on build_trainer's parts), for `--frames` env frames per job, at each
actor count, each mode, `--repeats` times, interleaved in one run (the modes' order flips
every repeat). Lock-step: every forward waits for all envs (actors + eval envs); auto: each
forward takes the first (actors + eval envs) // 2 ready, so the env threads step one half
while inference serves the other. Per configuration it prints the median fps (training
frames per second of stepping, the first reset not timed), the median envs per forward and
the actors' time shares (env_step: send + waiting in recv; inference: the forward and what
follows it on the actors' thread, nested ops in brackets); last, one line per actor count:

    inference_batch_auto_over_lockstep[actors=40]=<median fps auto / median fps lock-step>

    python pipelines/bench_inference_batch.py                          # actors 40 and 256, 3 repeats
    python pipelines/bench_inference_batch.py --repeats 1 --frames 20000 --actors 40   # a smoke
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import threading
import time

from rlbench.cli.command import Parser, refuse
from rlbench.config.flags import actor_counts, number

MODES = {0: "lock-step", -1: "auto"}
PROG = "pipelines/bench_inference_batch.py"
_positive = number(int, lo=1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="pong")
    p.add_argument("--actors", type=actor_counts("40,256"), default=[40, 256], help="comma-separated (default 40,256)")
    p.add_argument("--repeats", type=_positive, default=3, help="jobs per configuration (default 3)")
    p.add_argument("--frames", type=_positive, default=30_000, help="env frames per job (default 30000)")
    p.add_argument(
        "--threads",
        type=number(int, lo=0, note="0 = all hardware threads"),
        default=0,
        help="actor threads; 0 = all hardware threads",
    )
    p.add_argument("overrides", nargs="*", help="extra rlbench overrides, e.g. eval_envs=0 device=cpu")
    args = p.parse_args(argv)
    bad = [o for o in args.overrides if o.split("=", 1)[0].lstrip("+~") in ("inference_batch", "actors", "learner")]
    if bad:
        p.error(
            f"{' '.join(bad)}: allowed: overrides other than inference_batch, actors and learner (the "
            f"benchmark sets them)"
        )
    return args


def config(args, actors: int, mode: int):
    from rlbench.prepare.compose import compose_job

    overrides = [
        f"env={args.env}",
        f"actors={actors}",
        f"inference_batch={mode}",
        "learner=false",
        f"workload.frames={args.frames}",
        *args.overrides,
    ]
    if args.threads:
        overrides.append(f"actor_threads={args.threads}")
    return compose_job(overrides)


def one_job(conf) -> dict:
    """The actors' loop of build_trainer's parts until the task's frames: fps, envs per forward, shares."""
    from rlbench.prepare.plan import envs_of, plan_job
    from rlbench.train.trainer import build_trainer

    trainer = build_trainer(plan_job(conf))
    env, role = trainer.env, trainer.actors
    sizes, reset_s = [], [0.0]
    recv, reset = env.recv, env.reset

    def counted_recv():
        batch = recv()
        sizes.append(len(batch.env_ids))
        return batch

    def timed_reset(seed):
        t0 = time.perf_counter()
        batch = reset(seed)
        reset_s[0] = time.perf_counter() - t0
        sizes.append(len(batch.env_ids))
        return batch

    env.recv, env.reset = counted_recv, timed_reset  # ActorRole calls them through this object
    try:
        role.run(threading.Event())  # stops at conf.workload.frames
        wall = role.stepping_s()
        actors = dict(role.timer.totals)
        actors["env_step"] = actors.get("env_step", 0.0) - reset_s[0]  # the first reset is not timed in fps
        shares = {k: v / wall for k, v in actors.items()}
        nested = {k: v / wall for k, v in trainer.inference.timer.totals.items()}
        return {
            "fps": role.frames / wall,
            "batch": statistics.median(sizes),
            "used": env.inference_batch,
            "envs": envs_of(conf).total,
            "shares": shares,
            "nested": nested,
        }
    finally:
        trainer.close()
        del trainer
        gc.collect()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    from rlbench.config.rules import ConfigError
    from rlbench.core.resources import resolve_device

    try:
        confs = {(a, m): config(args, a, m) for a in args.actors for m in MODES}  # all checked before any job
    except ConfigError as e:
        refuse(PROG, f"{e} (no job run)")
    results: dict[tuple[int, int], list[dict]] = {k: [] for k in confs}
    first = confs[(args.actors[0], 0)]
    print(
        f"{first.env.id}, {args.frames} frames per job, device {resolve_device(first.device)}, actor threads "
        f"{first.actor_threads or 'all'} of {os.cpu_count()} CPUs, torch intra-op threads {torch.get_num_threads()}, "
        f"eval_envs {first.eval_envs}",
        flush=True,
    )
    for r in range(args.repeats):
        for a in args.actors:
            for m in MODES if r % 2 == 0 else list(MODES)[::-1]:
                res = one_job(confs[(a, m)])
                results[(a, m)].append(res)
                print(
                    f"repeat {r + 1} actors={a} inference_batch={m} ({MODES[m]}): {res['fps']:.0f} fps, "
                    f"{res['used']} of {res['envs']} envs per forward",
                    flush=True,
                )
    print()
    medians = {}
    for (a, m), runs in results.items():
        medians[(a, m)] = statistics.median(x["fps"] for x in runs)
        share = {k: statistics.median(x["shares"].get(k, 0.0) for x in runs) for k in runs[0]["shares"]}
        nested = {k: statistics.median(x["nested"].get(k, 0.0) for x in runs) for k in runs[0]["nested"]}
        inner = ", ".join(f"{k} {v:.1%}" for k, v in sorted(nested.items(), key=lambda kv: -kv[1]) if v >= 0.005)
        print(
            f"actors={a} inference_batch={m} ({MODES[m]}): median fps={medians[(a, m)]:.0f} "
            f"(runs: {', '.join(format(x['fps'], '.0f') for x in runs)}); median envs per forward="
            f"{statistics.median(x['batch'] for x in runs):g} of {runs[0]['envs']}; actors' time: "
            + ", ".join(f"{k} {v:.1%}" for k, v in share.items())
            + (f" [inference: {inner}]" if inner else "")
        )
    for a in args.actors:
        print(f"inference_batch_auto_over_lockstep[actors={a}]={medians[(a, -1)] / medians[(a, 0)]:.3f}")


if __name__ == "__main__":
    main()
