"""Actor-path efficiency: rlbench's actors + central inference vs raw AtariVectorEnv.

Both sides use the same AtariVectorEnv settings (envs, threads, batch, preprocessing).
  raw:     random actions straight into env.send / env.recv
  rlbench: ActorRole -> InferenceServer (algo=random: no network) -> unroll assembly in
           R2D2's Atari layout; no learner, the unrolls are dropped (until this session the
           old policy=random also copied them into an R2D2 replay)
They run alternately, `--repeats` times each, for `--seconds` each; the ratio of the
medians is printed last as `actor_path_efficiency=<x>` (target >= 0.9).

    python pipelines/bench_actor_path.py --actors 40 --repeats 5 --seconds 10
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import numpy as np

from rlbench.config.compose import compose_job
from rlbench.config.flags import Parser, number, refuse
from rlbench.config.validate import ConfigError
from rlbench.envs.atari.actors import AtariActors
from rlbench.envs.vector import resolve_inference_batch
from rlbench.plan import plan_job
from rlbench.trainer import build_trainer

PROG = "pipelines/bench_actor_path.py"


def config(args):
    overrides = [f"env={args.env}", f"actors={args.actors}", f"inference_batch={args.inference_batch}",
                 "algo=random", "workload.frames=1000000000000"]
    if args.threads:
        overrides.append(f"actor_threads={args.threads}")
    return compose_job(overrides)


def raw_fps(conf, seconds: float) -> float:
    actors = AtariActors(conf.env, conf.actors, conf.actor_threads or _threads(), conf.inference_batch)
    env, rng = actors._env, np.random.default_rng(0)
    env.reset(seed=conf.seed)  # not timed, on either side
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.send(rng.integers(0, actors.num_actions, env.batch_size))
        _, _, _, _, info = env.recv()
        steps += len(info["env_id"])
    fps = steps * conf.env.frameskip / (time.perf_counter() - t0)
    env.close()
    return fps


def rlbench_fps(conf, seconds: float) -> float:
    trainer = build_trainer(plan_job(conf))
    stop = threading.Event()
    role = trainer.actors
    watcher = threading.Thread(target=_stop_after_stepping, args=(role, stop, seconds))
    watcher.start()
    started = time.perf_counter()
    role.run(stop)
    end = time.perf_counter()
    fps = role.frames / (end - role.stepping_since)  # stepping only: the first reset is not timed on either side
    watcher.join()
    run_wall = end - started  # the shares are of the whole run: env_step includes that first reset
    ops = {**role.timer.fractions(run_wall), **trainer.inference.timer.fractions(run_wall)}
    print("  rlbench path time shares: " + ", ".join(f"{k} {v:.1%}" for k, v in ops.items()), flush=True)
    trainer.close()
    return fps


def _stop_after_stepping(role, stop: threading.Event, seconds: float) -> None:
    while role.stepping_since is None and not stop.wait(0.01):
        pass
    stop.wait(seconds)
    stop.set()


def _threads() -> int:
    import os

    return os.cpu_count() or 1


def main() -> None:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="pong")
    p.add_argument("--actors", type=number(int, lo=1), default=40)
    p.add_argument("--threads", type=number(int, lo=0, note="0 = all hardware threads"), default=0,
                   help="actor threads; 0 = all hardware threads")
    p.add_argument("--inference-batch", type=number(int, lo=-1), default=0)
    p.add_argument("--seconds", type=number(float, lo=0, lo_open=True), default=10.0)
    p.add_argument("--repeats", type=number(int, lo=1), default=5)
    args = p.parse_args()
    try:
        conf = config(args)
    except ConfigError as e:
        refuse(PROG, f"{e} (no run started)")
    raw, ours = [], []
    for i in range(args.repeats):
        raw.append(raw_fps(conf, args.seconds))
        ours.append(rlbench_fps(conf, args.seconds))
        print(f"repeat {i + 1}: raw {raw[-1]:.0f} fps, rlbench {ours[-1]:.0f} fps", flush=True)
    r, o = statistics.median(raw), statistics.median(ours)
    print(f"median raw AtariVectorEnv fps={r:.0f}  median rlbench actor path fps={o:.0f}  "
          f"(actors={conf.actors}, threads={conf.actor_threads or _threads()}, batch={resolve_inference_batch(conf.inference_batch, conf.actors)})")
    print(f"actor_path_efficiency={o / r:.3f}")


if __name__ == "__main__":
    main()
