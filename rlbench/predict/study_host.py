"""The host the GPU study plans for (pipelines/gpu_study.py): this GPU, a modelled one in a dry run
without one, or this CPU (the rehearsal, the CPU analogue); what it must offer before any job
(green contexts for the SM sweep, the compared precision), refused in one line (Refusal). `args`
is the command's flags as parsed. docs/gpu.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rlbench.core import precision as precisions  # precisions.cpu_flags: a test's fake CPU flags replace it
from rlbench.core.errors import Refusal
from rlbench.core.precision import precision_problem, published_sms
from rlbench.core.resources import cuda_properties, green_context_problem, sm_granularity, usable_cpus
from rlbench.predict.datasheet import Gpu
from rlbench.predict.study_plan import PLAN_FILE, sm_points

TARGET_GPU, TARGET_THREADS = "NVIDIA H100 80GB HBM3", 16  # a dry run without a GPU models the lent H100 host


@dataclass
class Host:
    device: str  # where the planned jobs run: cuda, or cpu (the rehearsal on a CPU)
    gpu: Gpu | None  # the GPU planned for: this host's, or --gpu's in a dry run without one
    units: int  # compute units the SM sweep divides: the GPU's SMs, or CPU threads
    threads: int  # the actors' host's hardware threads, as planned
    here: bool  # whether the jobs can run on this host (False: a dry run modelling another)
    tags: dict = field(default_factory=dict)  # this host's fingerprint

    @property
    def major(self) -> int | None:
        return self.gpu.major if self.gpu and self.device == "cuda" else None


def where(host: Host) -> str:
    return f"{host.gpu.name} ({host.units} SMs)" if host.gpu else f"this CPU ({host.units} threads)"


def here_threads() -> int:
    """This host's usable hardware threads."""
    return len(usable_cpus())


def target_gpu(name: str) -> Gpu:
    found = published_sms(name)
    if found is None:
        raise Refusal(
            f"--gpu={name}: no published SM count for it; allowed: a name containing H100, H200, A100, "
            "L40S, L4 or V100 (rlbench/core/precision.py)"
        )
    return Gpu(name, *found)


def planned_gpu(args) -> str | None:
    """The GPU a later part's plan was made for (--plan-from's stage_plan.json), which its dry run
    models where --gpu names none; None without a plan (a missing file is the caller's refusal)."""
    folder = getattr(args, "plan_from", None)
    plan = folder / PLAN_FILE if folder is not None else None
    if plan is None or not plan.is_file():
        return None
    return json.loads(plan.read_text()).get("host", "").rsplit(" (", 1)[0] or None


def probe(args, cuda_available: bool) -> Host:
    """The host the study plans for; Refusal where this one cannot run it."""
    from rlbench.tracking.fingerprint import host_tags  # lazy: keeps torch, mlflow off a refusal's start

    tags, threads = host_tags(), here_threads()
    if (args.gpu or args.host_threads) and (cuda_available or not args.dry_run or args.tiny):
        raise Refusal(
            f"--gpu/--host-threads: they model another host in a dry run; allowed: only with --dry-run "
            f"on a host without a CUDA device (this one has {'one' if cuda_available else 'none'})"
        )
    if cuda_available:
        props = cuda_properties(0)
        gpu = Gpu(props.name, props.multi_processor_count, props.major)
        return Host("cuda", gpu, gpu.sms, threads, True, tags)
    if args.tiny:
        return Host("cpu", None, threads, threads, True, tags)
    if args.dry_run:
        gpu = target_gpu(args.gpu or planned_gpu(args) or TARGET_GPU)
        return Host("cuda", gpu, gpu.sms, args.host_threads or TARGET_THREADS, False, tags)
    raise Refusal(
        "no CUDA device on this host (torch.cuda.is_available() is False) and the study is for a GPU; "
        "allowed: --dry-run (the plan for --gpu), or --tiny (the rehearsal on this host's CPU)"
    )


def stage_host(args, cuda_available: bool) -> Host:
    """The host a stage plans for: a GPU; a dry run's modelled one; this CPU for --tiny or the CPU
    analogue (experiment=sm_sweep_cpu); Refusal otherwise."""
    analogue = "experiment=sm_sweep_cpu" in args.overrides
    if not cuda_available and not (args.dry_run or args.tiny or analogue):
        why = ", so there are no SMs to limit" if args.stage == "sms" else ""
        raise Refusal(
            f"--stage={args.stage}: no CUDA device on this host (torch.cuda.is_available() is False){why}; "
            "allowed: a GPU host, --dry-run (the plan for --gpu), --tiny (the rehearsal on this CPU), or "
            "experiment=sm_sweep_cpu (the CPU analogue: sm_limit caps CPU threads)"
        )
    if analogue and not cuda_available and not args.gpu:
        from rlbench.tracking.fingerprint import host_tags  # lazy: keeps torch, mlflow off a refusal's start

        threads = here_threads()
        return Host("cpu", None, threads, threads, True, host_tags())
    return probe(args, cuda_available)


def check_host(args, host: Host, sms: list[int | None]) -> None:
    """What the host must offer before any job: green contexts for the SM sweep, the compared precision."""
    if host.here and host.device == "cuda" and any(s is not None for s in sms):
        smallest = min(s for s in sms if s is not None)
        if why := green_context_problem(0, smallest):
            raise Refusal(
                f"--sm-limits: {host.gpu.name} (compute capability {host.gpu.major}.x) gave no green "
                f"context: {why}; allowed: a driver of CUDA 12.4 or newer and a GPU of compute capability "
                ">= 6.0 with a torch that has torch.cuda.green_contexts, or --sm-limits none (the study "
                "without its SM sweep)"
            )
    if args.compare and host.here:
        name = host.gpu.name if host.gpu else "this CPU"
        if why := precision_problem(args.compare, host.device, name, precisions.cpu_flags(), host.major):
            raise Refusal(f"--compare={args.compare}: {why}; or --compare none")


def resolve_sms(args, host: Host) -> list[int | None]:
    """The SM sweep's limits (None: every unit): --sm-limits' list, none, or auto's points."""
    if args.sm_limits == "none":
        return [None]
    if args.sm_limits == "auto":
        return sm_points(host.units, host.major)
    too_many = [s for s in args.sm_limits if s is not None and s > host.units]
    if too_many:
        raise Refusal(
            f"--sm-limits={','.join('all' if s is None else str(s) for s in args.sm_limits)}: "
            f"{too_many[0]} is more than the {host.units} units here; allowed: 1..{host.units} and all"
        )
    return [None] + [s for s in args.sm_limits if s is not None]


def half_units(host: Host) -> int:
    smallest, multiple = sm_granularity(host.major) if host.major is not None else (1, 1)
    return max(smallest, host.units // 2 // multiple * multiple)
