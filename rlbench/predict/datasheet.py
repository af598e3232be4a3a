"""A GPU's side of a profile from its datasheet, for a plan made before any GPU was profiled:
central inference and the learner's update from the job's model FLOPs (counted on the CPU) at an
assumed share of NVIDIA's published peak, plus assumed fixed costs per call; the actor side is a
CPU profile's env curve. Every number made here is an estimate and says so. docs/gpu.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.core.precision import PUBLISHED_PEAK_TFLOPS, published_peak
from rlbench.predict.curves import Profile


@dataclass(frozen=True)
class Gpu:
    name: str
    sms: int
    major: int  # compute capability


@dataclass(frozen=True)
class Assumed:
    """What no GPU measured for this model (docs/gpu.md says why these values): the share of the
    published peak the networks reach, the host's work per central-inference call (stacking, the
    copy to the GPU, the kernel launches, exploration, unroll assembly) and per env, and an
    update's fixed cost (the recurrent core's steps run one after another)."""

    share_of_peak: tuple[tuple[str, float], ...] = (("fp32", 0.10), ("tf32", 0.05), ("bf16", 0.03), ("fp16", 0.03))
    forward_fixed_s: float = 2e-3
    forward_per_env_s: float = 20e-6
    update_fixed_s: float = 0.06

    def share(self, precision: str) -> float:
        return dict(self.share_of_peak)[precision]


ASSUMED = Assumed()


@dataclass(frozen=True)
class Flops:
    update: float | None  # model FLOPs of one learner update (None: no learner)
    forward_per_env: float  # model FLOPs of one env's forward in central inference


def peak_tflops(gpu: Gpu, precision: str) -> float:
    """The published dense peak of the whole GPU; ValueError naming the cards that have one."""
    found = published_peak(gpu.name, precision)
    if found is None:
        cards = ", ".join(key for key, _ in PUBLISHED_PEAK_TFLOPS)
        raise ValueError(
            f"no published {precision} peak for GPU {gpu.name!r}; allowed: a GPU whose name contains "
            f"one of {cards} (rlbench/core/precision.py), or --profile with a profile of this GPU"
        )
    return found[0]


def gpu_tables(
    gpu: Gpu, precision: str, flops: Flops, units: list[int], batches: list[int], assumed: Assumed = ASSUMED
) -> tuple[list[dict], list[dict]]:
    """(inference rows {units, batch, seconds}, update rows {units, seconds}) as a profile holds
    them, at `units` SMs each: the peak taken in proportion to the SMs granted (an estimate)."""
    inference, update = [], []
    for u in units:
        rate = peak_tflops(gpu, precision) * 1e12 * assumed.share(precision) * u / gpu.sms
        for b in batches:
            compute = b * flops.forward_per_env / rate
            inference.append(
                {"units": u, "batch": b, "seconds": assumed.forward_fixed_s + b * assumed.forward_per_env_s + compute}
            )
        if flops.update is not None:
            update.append({"units": u, "seconds": assumed.update_fixed_s + flops.update / rate})
    return inference, update


def planning_profile(
    env_rows: list[dict],
    host: dict,
    gpu: Gpu,
    conf,
    flops: Flops,
    units: list[int],
    batches: list[int],
    assumed: Assumed = ASSUMED,
) -> Profile:
    """One profile a prediction reads (rlbench.predict.jobs.Machine): env stepping and resets
    from `env_rows` (rlbench.predict.measure.env_curve on `host`), inference and the update on
    `gpu` at the job's precision from its datasheet (gpu_tables)."""
    inference, update = gpu_tables(gpu, conf.precision, flops, units, batches, assumed)
    tags = {
        "profile_device": "cuda",
        "gpu_name": gpu.name,
        "compute_units_total": str(gpu.sms),
        "env_id": conf.env.id,
        "host": host.get("host", "?"),
        "cpu_model": host.get("cpu_model", "?"),
        "hardware_threads": str(host["hardware_threads"]),
    }
    return Profile(
        "estimate", tags, env_rows, inference, update, params={"algo.name": conf.algo.name, "precision": conf.precision}
    )


def notes(gpu: Gpu, precisions: list[str], flops: Flops, assumed: Assumed = ASSUMED) -> list[str]:
    """The estimates a datasheet profile rests on, one line each."""
    peaks = ", ".join(f"{p} {peak_tflops(gpu, p):g} TFLOP/s at {assumed.share(p):.0%} of it" for p in precisions)
    upd = f"{flops.update / 1e9:.1f} GFLOP per update" if flops.update is not None else "no learner"
    return [
        (
            f"estimate: {gpu.name} ({gpu.sms} SMs) from its datasheet, not measured: published dense peak {peaks} "
            "(assumed share), in proportion to the SMs granted"
        ),
        f"counted: {upd}, {flops.forward_per_env / 1e6:.2f} MFLOP per env forward (FlopCounterMode on this CPU)",
        (
            f"estimate: {1e3 * assumed.forward_fixed_s:g} ms + {1e6 * assumed.forward_per_env_s:g} us per env of host "
            f"work per inference call, {1e3 * assumed.update_fixed_s:g} ms fixed per update (assumed)"
        ),
    ]


def fp32_tflops(gpu: Gpu, units: int) -> float:
    """The fp32 peak of `units` of the GPU's SMs (the whole card's published peak, in proportion)."""
    return peak_tflops(gpu, "fp32") * units / gpu.sms


def ratio_two_units(threads: int, gpu: Gpu, units: int) -> dict:
    """The CPU/GPU ratio in the paper's unit (CPU threads per SM) and per fp32 TFLOP/s of the SMs
    granted (datasheet peak), which compares across GPU generations."""
    return {"threads_per_sm": threads / units, "threads_per_fp32_tflops": threads / fp32_tflops(gpu, units)}


def equivalent_sms(sms: float, source: Gpu, target: Gpu) -> float:
    """The SMs of `target` that match `sms` SMs of `source` by fp32 peak (e.g. 40 V100 SMs ->
    about 15.5 H200 SMs: 40 x 15.7/80 over 66.9/132 TFLOP/s per SM)."""
    return fp32_tflops(source, 1) * sms / fp32_tflops(target, 1)
