"""The learner's update at two precisions, alternated in one run: its time, achieved TFLOP/s and MFU.

For each precision (`--precisions`, default fp32,bf16) the algorithm's real learner is built
(rlbench.predict.measure.learner_with_data: replay filled by central inference from synthetic
observations, as the profile times an update) on the job the overrides compose (default: Pong,
R2D2, the published batch of 64 sequences of 121 steps). The first update of each is counted
by torch's FlopCounterMode (rlbench/telemetry/flops.py) and not timed; then `--repeats` updates
per precision are timed, alternating precisions (the order flips every repeat), and the peak of
each precision is measured once (rlbench.predict.measure.gemm_peak: the fastest of a few
2048x2048 GEMMs on CPU). Prints per precision the median update time, the model FLOPs of an
update, TFLOP/s, the peak and the MFU, then last the ratio of the first precision's median
update time over the second's:

    python pipelines/bench_precision.py                           # Pong R2D2, 5 repeats
    # ... learner_update_ratio[fp32/bf16]=<x>
    python pipelines/bench_precision.py --repeats 3 env=cartpole   # any job overrides
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from rlbench.cli.command import Parser
from rlbench.config.flags import number
from rlbench.config.rules import ConfigError
from rlbench.prepare.compose import compose_job

PROG = "pipelines/bench_precision.py"


def parse(argv):
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precisions", default="fp32,bf16", help="two precisions, compared first over second")
    p.add_argument("--repeats", type=number(int, lo=1), default=5, help="timed updates per precision (default 5)")
    p.add_argument("overrides", nargs="*", help="job overrides (default: Pong, R2D2's defaults)")
    args = p.parse_args(argv)
    args.precisions = [x for x in args.precisions.split(",") if x]
    if len(args.precisions) != 2:
        p.error(f"--precisions={','.join(args.precisions)}: allowed: two precisions, e.g. fp32,bf16")
    return args


def learner_at(overrides: list[str], precision: str):
    """(device, learner, fill, model FLOPs of one update): the first update counted, untimed."""
    from rlbench.predict.measure import learner_with_data
    from rlbench.telemetry.flops import FlopRate

    _, device, learner, fill = learner_with_data(compose_job([*overrides, f"precision={precision}"]))
    rate = FlopRate()
    fill()
    with rate.call(1):
        learner.update()
    return device, learner, fill, rate.flops_per_item


def main(argv=None) -> int:
    import torch

    from rlbench.core.precision import Amp
    from rlbench.predict.measure import gemm_peak

    args = parse(argv)
    try:
        built = {p: learner_at(args.overrides, p) for p in args.precisions}
    except ConfigError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    times: dict[str, list[float]] = {p: [] for p in args.precisions}
    for r in range(args.repeats):
        for p in args.precisions if r % 2 == 0 else args.precisions[::-1]:
            device, learner, fill, _ = built[p]
            fill()
            with Amp(p, device.type).scope():
                t0 = time.perf_counter()
                learner.update()
                times[p].append(time.perf_counter() - t0)
            print(f"repeat {r + 1}: {p} update {times[p][-1]:.3f} s", flush=True)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, device {built[args.precisions[0]][0]}"
    )
    medians = {}
    for p in args.precisions:
        device, _, _, flops = built[p]
        peak = gemm_peak(p, device)
        medians[p] = statistics.median(times[p])
        tflops = flops / medians[p] / 1e12
        print(
            f"{p}: update {medians[p]:.3f} s median ({min(times[p]):.3f}..{max(times[p]):.3f}, n={len(times[p])}); "
            f"{flops / 1e9:.1f} GFLOP per update (FlopCounterMode); {tflops:.3f} TFLOP/s; peak {peak['tflops']:.3f} "
            f"TFLOP/s ({peak['n']}x{peak['n']} GEMM); MFU {tflops / peak['tflops']:.1%}"
        )
    a, b = args.precisions
    print(f"learner_update_ratio[{a}/{b}]={medians[a] / medians[b]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
