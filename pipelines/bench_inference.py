"""The hot path's modes side by side: central inference against its bare forward, and the learner's update.

Inference: for each actor count (`--actors`, default 4,40,256) at the batch a job of that many
actors forwards (`inference_batch`'s rule over actors + eval envs), one InferenceServer per mode
(`--modes`, default every mode this host offers; rlbench/core/hot_path.py) steps synthetic
observations: per repeat the mean latency of `--calls` calls (InferenceServer.step, as a job's
`inference_latency_ms`), the mode's forward alone and the eager bare forward (the job's
`inference_forward_ms`), the modes interleaved, the order flipped every repeat; the first 2 calls
(a compile, a capture) are timed apart as the mode's warm-up. Learner (`--updates` > 0): the
algorithm's real learner per mode (rlbench.predict.measure.learner_with_data), its first update
(a compile's) timed apart, then `--updates` updates alternated; model FLOPs counted once
(FlopCounterMode), the share of the measured GEMM peak (gemm_peak: the fastest 2048x2048 fp32
GEMM on all threads, as `python -m rlbench.profile` measures it). Medians, figures by name:

    inference_overhead[actors=40,mode=eager]=<latency / eager bare forward>
    inference_step_ms[actors=40,mode=eager]=<latency>: h2d_transfer <ms>, forward <ms>, ..., untimed <ms>
    learner_peak_share[mode=compile]=<model FLOP/s / GEMM peak>

A mode may name a torso layout after `@` (`hot_path.memory_format`): `--modes
eager@contiguous,eager@channels_last` times the two layouts side by side; without `@` the job's
default (auto).

    python pipelines/bench_inference.py                            # Pong R2D2, 5 repeats
    python pipelines/bench_inference.py --actors 4 --updates 0 env=cartpole   # a smoke
"""

from __future__ import annotations

import argparse
import statistics
import time

from rlbench.cli.command import Parser, refuse
from rlbench.config.flags import actor_counts, number

PROG = "pipelines/bench_inference.py"
_positive = number(int, lo=1)
WARM = 2  # calls timed apart: a compile or a capture, then the first sizes
# R2D2's replay of 256 sequences (0.23 GB on Pong, prefaulted) per server and learner, not 2000
# (1.8 GB each): an insert's and a sample's cost do not depend on it; min_replay fits in it
SMALL_REPLAY = ["algo.replay_capacity=256", "algo.min_replay=64"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--actors", type=actor_counts("4,40,256"), default=[4, 40, 256], help="comma-separated (default 4,40,256)"
    )
    p.add_argument("--modes", default="", help="comma-separated modes (default: every mode this host offers)")
    p.add_argument("--repeats", type=_positive, default=5, help="timings per mode and actor count (default 5)")
    p.add_argument("--calls", type=_positive, default=20, help="inference calls per timing (default 20)")
    p.add_argument("--updates", type=number(int, lo=0, note="0 = no learner"), default=3, help="timed updates per mode")
    p.add_argument("overrides", nargs="*", help="job overrides, e.g. env=cartpole precision=bf16")
    args = p.parse_args(argv)
    bad = [
        o
        for o in args.overrides
        if o.split("=", 1)[0].lstrip("+~") in ("actors", "hot_path.inference", "hot_path.learner")
    ]
    if bad:
        p.error(f"{' '.join(bad)}: allowed: overrides other than actors and hot_path.* (the benchmark sets them)")
    return args


def configs(args) -> tuple[dict, list[str]]:
    """{(actors, mode): conf}, the modes: every one validated before any timing (a mode this
    host lacks is refused as a job refuses it)."""
    from rlbench.core.hot_path import MODES, offered
    from rlbench.core.resources import resolve_device
    from rlbench.prepare.compose import compose_job

    modes = [m for m in args.modes.split(",") if m]
    if not modes:
        device = resolve_device(compose_job(args.overrides).device).type
        modes = list(offered("inference", device))
    confs = {}
    for a in args.actors:
        for m in modes:
            mode, layout = split_mode(m)
            learner = mode if mode in MODES["learner"] else "eager"
            confs[(a, m)] = compose_job(
                [
                    *SMALL_REPLAY,
                    *args.overrides,
                    f"actors={a}",
                    f"hot_path.inference={mode}",
                    f"hot_path.learner={learner}",
                    *layout,
                ]
            )
    return confs, modes


def split_mode(m: str) -> tuple[str, list[str]]:
    """('eager', ['hot_path.memory_format=channels_last']) of 'eager@channels_last'; ('eager', []) of 'eager'."""
    mode, _, layout = m.partition("@")
    return mode, [f"hot_path.memory_format={layout}"] if layout else []


def server_for(conf):
    """(server, step args): central inference of a job of conf.actors at its forward batch."""
    import copy
    import threading

    import numpy as np
    import torch

    from rlbench.core.algorithms import algorithm
    from rlbench.core.resources import resolve_device
    from rlbench.envs.spec import env_spec
    from rlbench.envs.vector import resolve_inference_batch
    from rlbench.predict.measure import synthetic_obs
    from rlbench.prepare.plan import envs_of
    from rlbench.roles.contract import AlgoContext
    from rlbench.roles.inference import InferenceServer

    device, spec = resolve_device(conf.device), env_spec(conf.env)
    n = resolve_inference_batch(conf.inference_batch, envs_of(conf).total)
    torch.manual_seed(conf.seed)
    acting = copy.deepcopy(conf)
    acting.learner = False  # unrolls into replay: no unroll queue to fill up without a learner (its batch as a job's)
    parts = algorithm(conf.algo.name).build(AlgoContext(acting, spec, device, n, 0, threading.Event()))
    server = InferenceServer(parts.policy, device, n, n, hot_path=conf.hot_path.inference, batch=n)
    obs = synthetic_obs(np.random.default_rng(0), n, spec)
    return server, (np.arange(n), obs, np.zeros(n, np.float32), np.zeros(n, bool))


def time_calls(server, step, calls: int) -> tuple[float, dict[str, float]]:
    """Mean seconds of `calls` InferenceServer.step calls, as a job's inference_latency_ms, and
    the mean seconds per call in each of the server's timed operations (its OpTimer's)."""
    from rlbench.envs.vector import StepBatch

    before = dict(server.timer.totals)
    t0 = time.perf_counter()
    for _ in range(calls):
        server.step(StepBatch(*step))
    mean = (time.perf_counter() - t0) / calls
    return mean, {k: (v - before.get(k, 0.0)) / calls for k, v in server.timer.totals.items()}


def alone(server, n: int, calls: int) -> tuple[float, float]:
    """(the mode's forward alone, the eager bare forward): mean seconds, as the job's reference."""
    import contextlib

    import torch

    from rlbench.core.precision import at_least_fp32
    from rlbench.roles.hot_path import bare_forward_s

    eager = server._bare_forward_s(n, contextlib.nullcontext)
    if isinstance(eager, str):
        raise RuntimeError(eager)
    shared, dev = server.policy.shared, server.device
    obs = torch.as_tensor(server._obs, device=dev).unsqueeze(0)
    zeros = {t: torch.zeros(1, n, dtype=t, device=dev) for t in (torch.int64, torch.float32, torch.bool)}
    state = server.policy.initial_state(n, dev)

    def forward():
        with shared.lock, torch.no_grad(), shared.amp.autocast():
            return server.forward(obs, zeros[torch.int64], zeros[torch.float32], zeros[torch.bool], state)

    return bare_forward_s(forward, lambda out: at_least_fp32(out[0][0]).cpu(), calls), eager


def inference(args, confs: dict, modes: list[str]) -> dict:
    """{(actors, mode): {warm, latency [s...], forward [s...], bare [s...], batch}}."""
    built = {k: server_for(c) for k, c in confs.items()}
    res: dict = {k: {"latency": [], "forward": [], "bare": [], "ops": []} for k in confs}
    for (a, m), (server, step) in built.items():
        t0 = time.perf_counter()
        time_calls(server, step, WARM)
        res[(a, m)] |= {"warm": (time.perf_counter() - t0) / WARM, "batch": len(step[0])}
    for r in range(args.repeats):
        for a in args.actors:
            for m in modes if r % 2 == 0 else modes[::-1]:
                server, step = built[(a, m)]
                latency, ops = time_calls(server, step, args.calls)
                res[(a, m)]["latency"].append(latency)
                res[(a, m)]["ops"].append(ops)
                forward, bare = alone(server, len(step[0]), args.calls)
                res[(a, m)]["forward"].append(forward)
                res[(a, m)]["bare"].append(bare)
        print(f"repeat {r + 1} of {args.repeats} done", flush=True)
    for (a, m), (server, _) in built.items():
        res[(a, m)]["ran"] = server.hot_path_tags().get("hot_path/inference", "no forward")
    return res


def learner(args, modes: list[str]) -> dict:
    """{mode: {first, updates [s...], flops}}: the first update (a compile's) apart, then alternated."""
    from rlbench.core.hot_path import MODES
    from rlbench.predict.measure import learner_with_data
    from rlbench.prepare.compose import compose_job
    from rlbench.roles.contract import layout_of
    from rlbench.telemetry.flops import FlopRate

    modes = [m for m in modes if split_mode(m)[0] in MODES["learner"]]
    built, res = {}, {}
    for m in modes:
        mode, layout = split_mode(m)
        conf = compose_job([*SMALL_REPLAY, *args.overrides, f"hot_path.learner={mode}", *layout])
        _, _, lrn, fill = learner_with_data(conf)
        fill()
        t0 = time.perf_counter()
        lrn.update()
        res[m] = {"first": time.perf_counter() - t0, "updates": []}
        built[m] = (lrn, fill)
    lrn, fill = built[modes[0]]
    rate = FlopRate()
    fill()
    with rate.call(1):
        lrn.update()
    for r in range(args.updates):
        for m in modes if r % 2 == 0 else modes[::-1]:
            lrn, fill = built[m]
            fill()
            t0 = time.perf_counter()
            lrn.update()
            res[m]["updates"].append(time.perf_counter() - t0)
            print(f"update {r + 1}: {m} {res[m]['updates'][-1]:.3f} s", flush=True)
    for m in modes:
        layout = layout_of(built[m][0].net) or "no torso layout"
        res[m] |= {"flops": rate.flops_per_item, "ran": f"{built[m][0].hot.ran}, {layout}"}
    return res


def report_inference(res: dict, args, modes: list[str]) -> None:
    med = statistics.median
    for a in args.actors:
        bare = med(x for m in modes for x in res[(a, m)]["bare"])
        batch = res[(a, modes[0])]["batch"]
        print(f"inference_forward_ms[actors={a}]={1e3 * bare:.3f}  (eager bare forward, batch {batch})")
        for m in modes:
            x = res[(a, m)]
            lat, fwd = med(x["latency"]), med(x["forward"])
            print(
                f"inference_latency_ms[actors={a},mode={m}]={1e3 * lat:.3f} (ran {x['ran']}; runs "
                f"{', '.join(f'{1e3 * v:.2f}' for v in x['latency'])}); forward alone {1e3 * fwd:.3f} ms; "
                f"first {WARM} calls {1e3 * x['warm']:.0f} ms each"
            )
            print(f"inference_overhead[actors={a},mode={m}]={lat / bare:.3f}")
            print(f"inference_step_ms[actors={a},mode={m}]={1e3 * lat:.3f}: {step_parts(x['ops'], lat)}")
        for m in modes[1:]:
            ratio = med(res[(a, modes[0])]["latency"]) / med(res[(a, m)]["latency"])
            print(f"inference_speedup[actors={a},mode={m}]={ratio:.3f}  ({modes[0]} latency / {m} latency)")


def step_parts(ops: list[dict[str, float]], latency: float) -> str:
    """A step's time by the server's operations (medians over the repeats, ms per call) and the
    rest, untimed (actions, recurrent state, Python between the operations). On CUDA the forward
    only launches its kernels: d2h_transfer waits for them."""
    med = statistics.median
    parts = {k: med(r.get(k, 0.0) for r in ops) for k in dict.fromkeys(k for r in ops for k in r)}
    parts["untimed"] = latency - sum(parts.values())
    return ", ".join(f"{k} {1e3 * v:.3f}" for k, v in parts.items())


def report_learner(res: dict, peak: dict) -> None:
    for m, x in res.items():
        upd = statistics.median(x["updates"])
        gflops = x["flops"] / upd / 1e9
        runs = ", ".join(f"{v:.2f}" for v in x["updates"])
        print(
            f"learner_update_s[mode={m}]={upd:.3f} (ran {x['ran']}; runs {runs}); first update {x['first']:.1f} s "
            f"(compile and first update, {x['first'] - upd:.1f} s over the median); {x['flops'] / 1e9:.1f} GFLOP"
        )
        print(
            f"learner_peak_share[mode={m}]={gflops / (1e3 * peak['tflops']):.3f}  ({gflops:.0f} of "
            f"{1e3 * peak['tflops']:.0f} GFLOP/s, {peak['n']}x{peak['n']} fp32 GEMM)"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import os

    import torch

    from rlbench.config.rules import ConfigError
    from rlbench.core.resources import resolve_device
    from rlbench.predict.measure import gemm_peak

    try:
        confs, modes = configs(args)
    except ConfigError as e:
        refuse(PROG, f"{e} (nothing timed)")
    first = next(iter(confs.values()))
    device = resolve_device(first.device)
    print(
        f"{first.env.id}, {first.algo.name}, device {device}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"intra-op threads of {os.cpu_count()} CPUs, precision {first.precision}, modes {', '.join(modes)}",
        flush=True,
    )
    res = inference(args, confs, modes)
    lrn = learner(args, modes) if args.updates else {}
    peak = gemm_peak(first.precision, device) if lrn else None
    print()
    report_inference(res, args, modes)
    if lrn:
        report_learner(lrn, peak)


if __name__ == "__main__":
    main()
