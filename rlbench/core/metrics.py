"""The metric and operation names a job records: the contract logging, the sweep summary,
the report, the verdict and `search.objectives` share. Each metric is declared once (`Metric`:
unit, when it is logged, one line of meaning); docs/metrics.md holds the longer story, and
tests/test_metrics_contract.py checks that the two agree and that a real job logs nothing
undeclared. Rename a metric here first.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

TASK_ELAPSED = "task_elapsed_s"  # a tick's seconds since the task started (rlbench/roles/runner.py)
# a pack's node figures (rlbench/sweeps/pack.py): logged on its run `pack`, never by a job
NODE_FPS, NODE_ENERGY, NODE_SLOWDOWN = "node/fps", "node/energy_per_task_j", "node/slowdown"
NODE_RATIO = "node/cpu_gpu_ratio"  # also on each of a pack's jobs: the report's per-node ratio column
IDLE_POWER = "idle_power_gpu_w"  # the GPU's idle power before a sweep (sweep.idle_power_s; sweeps/warm.py)


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    when: str
    doc: str


_TRAINING = [
    Metric("fps", "env frames / s", "final", "the actor rate: all frames / the actors' stepping time"),
    Metric("sps", "agent steps / s", "final", "fps / frameskip"),
    Metric("task_fps", "env frames / s", "final", "the task rate: frames / runtime_s (includes the learner's tail)"),
    Metric("learner_updates_per_s", "updates / s", "final", "learner updates / the learner's wall time"),
    Metric(
        "window/fps",
        "env frames / s",
        "tick",
        "frames in the tick's window / the part of it the actors stepped (at least half)",
    ),
    Metric("window/sps", "agent steps / s", "tick", "window/fps / frameskip"),
    Metric(
        "window/learner_updates_per_s",
        "updates / s",
        "tick",
        "updates in the window / its length, while the learner runs",
    ),
    Metric(
        "task_elapsed_s",
        "s",
        "tick",
        "seconds since the task started at the tick (its step, unrounded): the x "
        "axis of the chart view's window/* charts",
    ),
    Metric("actors_done_s", "s", "final", "when the actors finished stepping, since the task started"),
    Metric(
        "steady/fps",
        "env frames / s",
        "final",
        "the frames over the seconds of the steady windows (after the warm-up, before the first role is done)",
    ),
    Metric(
        "steady/fps_min", "env frames / s", "final", "the lowest rate of 5 consecutive blocks of the steady windows"
    ),
    Metric(
        "steady/fps_max", "env frames / s", "final", "the highest rate of 5 consecutive blocks of the steady windows"
    ),
    Metric(
        "steady/windows",
        "count",
        "final",
        "the steady windows counted (fewer than tracking.steady_min_windows: no steady rate, the reason in unmeasured)",
    ),
    Metric("steady/s", "s", "final", "seconds the steady windows cover"),
    Metric(
        "steady/learner_updates_per_s",
        "updates / s",
        "final",
        "the learner updates over the seconds of the steady windows",
    ),
    Metric("steady/power_gpu_w", "W", "final", "the median power_gpu_w tick of the steady windows"),
    Metric("steady/power_cpu_w", "W", "final", "the median power_cpu_w tick of the steady windows (RAPL)"),
    Metric(
        "steady/frames_per_j",
        "env frames / J",
        "final",
        "the steady windows' frames / the measured sources' energy over them",
    ),
    Metric(
        "job_start_s",
        "s",
        "final",
        "from the job's MLflow run's creation to its actors' first step (envs made and reset, the algorithm built)",
    ),
    Metric(
        "job_start_envs_s",
        "s",
        "final",
        "the part of job_start_s spent getting the envs: made, or taken from the job before (tag envs_from_shelf)",
    ),
    Metric("episode_return", "game score", "episode", "unclipped return of a training actor's episode"),
    Metric("episode_return_mean20", "game score", "final", "mean of the last 20 episode_return values"),
    Metric("eval_return", "game score", "episode", "unclipped return of a greedy evaluation env's episode"),
    Metric("eval_return_mean20", "game score", "final", "mean of the last 20 eval_return values"),
    Metric("eval_frames", "env frames", "final", "frames the evaluation envs stepped (not in frames or fps)"),
    Metric("loss", "-", "tick, final", "the learner's last loss"),
    Metric(
        "task_replay_ratio",
        "samples / unroll",
        "final",
        "learner_updates x batch_size / the task's unrolls (R2D2: sequences; V-trace: 1)",
    ),
    Metric("inference_batch_mean", "envs / forward", "tick, final", "mean environments per central inference call"),
    Metric("inference_latency_ms", "ms", "tick, final", "mean wall time of one central inference call"),
    Metric(
        "inference_forward_ms",
        "ms",
        "final",
        "the bare-forward reference: the network's eager forward alone at the calls' mean batch, timed after the task",
    ),
    Metric("inference_forward_batch", "envs / forward", "final", "the batch inference_forward_ms was timed at"),
    Metric(
        "inference_overhead",
        "ratio",
        "final",
        "central inference's mean latency per call (its first 2 left out) / inference_forward_ms",
    ),
    Metric("policy_version", "updates", "tick, final", "the learner update whose weights inference acts with"),
    Metric("runtime_s", "s", "final", "time to finish the task (frames and updates both met)"),
    Metric("sim_share", "fraction", "final", "the actors' env stepping time / runtime_s (simulation)"),
    Metric("learner_share", "fraction", "final", "the learner's wall time less its waiting / runtime_s"),
    Metric("frames", "env frames", "tick, final", "frames the training actors stepped"),
    Metric("learner_updates", "updates", "tick, final", "learner updates made"),
    Metric("episodes", "count", "tick, final", "training episodes finished"),
    Metric("queue_size", "unrolls", "tick", "unrolls waiting for the learner: V-trace's FIFO, R2D2's unroll queue"),
    Metric("unrolls", "unrolls", "tick, final", "unrolls inference completed (V-trace, random)"),
    Metric(
        "actor_disconnects",
        "count",
        "tick, final",
        "actor process departures seen (one per recv after which ids left); only where actors can leave",
    ),
    Metric(
        "rpc_rtt_ms",
        "ms",
        "final",
        "actor processes: a Step sent to its Actions back (loopback or network plus "
        "the wait for central inference), the median of the processes' p50 over their last second",
    ),
    Metric(
        "rpc_rtt_ms_p99", "ms", "final", "actor processes: the largest of their round trips' p99 over their last second"
    ),
    Metric(
        "actor_procs_cpu_s",
        "s",
        "final",
        "actor processes: the CPU seconds of every one that joined, summed (as last reported)",
    ),
    Metric(
        "actor_refused",
        "count",
        "final",
        "actor processes refused or dropped: a wrong token, protocol, env spec "
        "or message, or no free envs; each logged with its peer and why; only where actors connect",
    ),
    Metric(
        "actor_rejoins",
        "count",
        "final",
        "actor processes that joined after the job's start, on the envs of one that left; only where actors can leave",
    ),
    Metric("wire_bytes_per_step", "bytes / env step", "final", "actor processes: message bytes both ways per env step"),
    Metric(
        "actor_lost_steps",
        "agent steps",
        "tick, final",
        "training steps of departed actors' unfinished unrolls, dropped (in frames, never in replay)",
    ),
    Metric("cpu_gpu_ratio", "threads / unit", "final", "actor hardware threads / granted compute units"),
    Metric("sm_granted", "units", "final", "compute units the learner and inference got"),
    Metric("sm_total", "units", "final", "the device's compute units"),
    Metric("actor_threads_used", "threads", "final", "CPU threads stepping environments"),
    Metric("learner_intra_op_threads", "threads", "final", "torch intra-op threads of the learner thread"),
    Metric(
        "learner_tflops",
        "TFLOP/s",
        "final",
        "the learner's achieved model FLOP/s: FLOPs per update (torch's "
        "FlopCounterMode, the first update) x the later updates / their time",
    ),
    Metric(
        "learner_flops_per_update",
        "FLOPs",
        "final",
        "model FLOPs of one learner update, counted by torch's FlopCounterMode",
    ),
    Metric("learner_mfu", "fraction", "final", "learner_tflops / peak_tflops"),
    Metric(
        "inference_tflops",
        "TFLOP/s",
        "final",
        "central inference's achieved model FLOP/s: FLOPs per env "
        "(counted once) x the later forwards' envs / their time",
    ),
    Metric("inference_mfu", "fraction", "final", "inference_tflops / peak_tflops"),
    Metric(
        "peak_tflops",
        "TFLOP/s",
        "final",
        "this host's peak at the job's precision (tag peak_source: published or measured by the profile's GEMM)",
    ),
]

_TELEMETRY = [
    Metric("energy_per_task_j", "J", "final", "sum of the known energy parts over the task"),
    Metric("energy_gpu_j", "J", "final", "GPU energy over the task (NVML)"),
    Metric("energy_cpu_j", "J", "final", "CPU package energy over the task (RAPL, or an estimate)"),
    Metric("energy_dram_j", "J", "final", "DRAM energy over the task (RAPL)"),
    Metric("power_gpu_w_avg", "W", "final", "mean GPU board power"),
    Metric("power_gpu_w_max", "W", "final", "peak GPU board power"),
    Metric("power_cpu_w_avg", "W", "final", "CPU package energy / time"),
    Metric(
        IDLE_POWER,
        "W",
        "final",
        "GPU 0's board power before a study stage's first job (its run `idle power`, not a job's)",
    ),
    Metric(
        NODE_FPS,
        "env frames / s",
        "final",
        "a pack's: its jobs' mean window/fps summed over the windows all of them stepped (its run `pack`)",
    ),
    Metric(NODE_ENERGY, "J", "final", "a pack's: the node's measured energy over the pack's window / its K tasks"),
    Metric(NODE_SLOWDOWN, "ratio", "final", "a pack's: the median of its jobs' runtime_s over the same config alone"),
    Metric(NODE_RATIO, "ratio", "final", "a pack's (and its jobs'): the jobs' actor threads over the node's units"),
    Metric("perf_per_watt", "frames / s / W", "final", "fps / mean watts of the measured sources"),
    Metric("joules_per_mframe", "J / 10^6 frames", "final", "energy_per_task_j per million frames"),
    Metric("gpu_util_avg", "fraction", "final", "NVML utilisation"),
    Metric("gpu_busy_frac", "fraction", "final", "union of CUDA-event spans / runtime_s"),
    Metric("cpu_util_avg", "fraction", "final", "system-wide CPU utilisation"),
    Metric("annotation_cost_us", "us", "final", "cost of one operation annotation"),
    Metric("telemetry_samples", "count", "final", "telemetry rows sampled"),
    Metric("telemetry_cpu_s", "s", "final", "CPU time of the telemetry sampler thread (its own cost)"),
    Metric("power_gpu_w", "W", "tick", "GPU power, newest sample"),
    Metric("power_cpu_w", "W", "tick", "CPU package power, newest sample"),
    Metric("gpu_util", "fraction", "tick", "GPU utilisation, newest sample"),
    Metric("cpu_util", "fraction", "tick", "CPU utilisation, newest sample"),
    Metric("proc_cores_busy", "cores", "tick", "cores this job's process keeps busy"),
]

METRICS: dict[str, Metric] = {m.name: m for m in _TRAINING + _TELEMETRY}

# Operations per role, as each role's OpTimer names them; every role also has `other`. The
# algorithms share the names where the work is the same (each declares which it times: its
# config.py's OPS, rlbench/core/algorithms.py).
OPS: dict[str, tuple[str, ...]] = {
    "actors": ("env_step", "inference", "rate_limited"),
    "inference": (
        "h2d_transfer",
        "forward",
        "d2h_transfer",
        "unroll_assembly",
        "initial_priority",
        "replay_insert",
        "queue_put",
        "queue_full_wait",
    ),
    "learner": (
        "wait",
        "queue_get",
        "replay_insert",
        "replay_sample",
        "h2d_transfer",
        "stack_rebuild",
        "forward_backward",
        "optimizer_step",
        "replay_update",
        "publish",
    ),
    # the actor processes (actor_procs, actor_server.*; rlbench/remote/), summed over processes:
    # each process's loop steps its envs and waits for their actions (its Reports' times)
    "actor_procs": ("env_step", "wait_actions"),
}
OTHER = "other"
PROCS_ROLE = "actor_procs"


def op_frac(role: str, op: str) -> str:
    """The metric name of a role's share of wall time in an operation."""
    return f"op_frac/{role}/{op}"


def proc_role(index: int) -> str:
    """The role of one actor process, `actor_proc<i>` (i: the job's count of processes that
    joined before it, lost ones included): its metrics are the PER_PROCESS family."""
    return f"actor_proc{index}"


OP_FRACS: dict[str, Metric] = {
    op_frac(role, op): Metric(op_frac(role, op), "fraction", "final", f"share of {role}' wall time in {op}")
    for role, ops in OPS.items()
    for op in (*ops, OTHER)
}


# The metrics of each plugged-in power meter (rlbench/telemetry/sources.py), <source> its name:
# declared by the family, so a new meter needs no edit here; a name is declared while its
# meter is registered in this process.
FAMILIES: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric(
            "energy_<source>_j", "J", "final", "a plugged-in power meter's energy over the task (in energy_per_task_j)"
        ),
        Metric("power_<source>_w_avg", "W", "final", "a plugged-in power meter's mean power"),
    ]
}


# One family per actor process (<i>: proc_role's index), declared by pattern: a job has as many
# processes as it has.
PER_PROCESS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric(
            op_frac("actor_proc<i>", "<op>"),
            "fraction",
            "final",
            "actor process i: share of its wall time in an operation of the actor_procs role, or other",
        ),
        Metric("actor_proc<i>/cpu_s", "s", "final", "actor process i: its CPU seconds (as last reported)"),
        Metric(
            "actor_proc<i>/bytes_sent_per_step",
            "bytes / env step",
            "final",
            "actor process i: its Steps' message bytes per env step",
        ),
        Metric(
            "actor_proc<i>/bytes_received_per_step",
            "bytes / env step",
            "final",
            "actor process i: the Actions' message bytes it was sent per env step",
        ),
    ]
}
_PER_PROCESS = re.compile(
    "|".join(
        re.escape(name)
        .replace("<i>", "(?:0|[1-9][0-9]*)")
        .replace("<op>", "(?:" + "|".join((*OPS[PROCS_ROLE], OTHER)) + ")")
        for name in PER_PROCESS
    )
)


def per_process(name: str) -> bool:
    """Whether `name` is one actor process's metric (PER_PROCESS, <i> and <op> filled in)."""
    return _PER_PROCESS.fullmatch(name) is not None


# MLflow's own system-metrics sampler (tracking.system_metrics, on by default: the UI's "System
# metrics" tab) logs step metrics under system/, one value per tracking.log_every_s. Their names
# are MLflow's and vary by host and MLflow version (system/cpu_utilization_percentage, one set
# per GPU: system/gpu_0_utilization_percentage, ...): declared as one family by their prefix.
SYSTEM_PREFIX = "system/"
SYSTEM = Metric(
    f"{SYSTEM_PREFIX}<name>",
    "as named",
    "tick",
    "MLflow's system metrics (CPU, memory, disk, network, per-GPU utilisation and power)",
)


POWER_SOURCES_ENV = "RLBENCH_POWER_SOURCES"  # name=module:attr,... (rlbench/telemetry/sources.py)
_PLUGGED_SOURCES: list[str] = []  # meters registered in this process (rlbench.telemetry.sources.register)


def plug_source(name: str) -> None:
    """Declare the metrics of power meter `name` (called by rlbench.telemetry.sources.register:
    the contract sits below telemetry and imports none of it)."""
    if name not in _PLUGGED_SOURCES:
        _PLUGGED_SOURCES.append(name)


def unplug_source(name: str) -> None:
    if name in _PLUGGED_SOURCES:
        _PLUGGED_SOURCES.remove(name)


def plugged_sources() -> list[str]:
    """The power meters of this process: RLBENCH_POWER_SOURCES's names (also before telemetry
    is imported: a search's objectives are checked first) and the registered ones."""

    named = [item.partition("=")[0].strip() for item in os.environ.get(POWER_SOURCES_ENV, "").split(",")]
    return list(dict.fromkeys([n for n in named if n] + _PLUGGED_SOURCES))


def source_metrics() -> dict[str, Metric]:
    """The metrics of the power meters registered in this process, by name."""
    return {f.name.replace("<source>", s): f for s in plugged_sources() for f in FAMILIES.values()}


# The metrics only one algorithm logs, declared by its package (config.py's METRICS) and added
# here when rlbench/core/algorithms.py loads it: a new algorithm's metrics need no edit here.
_ALGORITHMS: dict[str, dict[str, Metric]] = {}


def declare_algorithm(algo: str, metrics) -> None:
    """Declare the metrics algorithm `algo` logs beside the shared ones (called by the registry;
    the contract sits below the algorithms and imports none of them)."""
    clash = [m.name for m in metrics if m.name in METRICS or m.name in OP_FRACS]
    if clash:
        raise ValueError(
            f"algorithm {algo!r} declares {', '.join(clash)}, already in rlbench/core/metrics.py's contract"
        )
    _ALGORITHMS[algo] = {m.name: m for m in metrics}


def algorithm_metrics(algo: str | None = None) -> dict[str, Metric]:
    """The metrics algorithm `algo` declares; None: those of every algorithm loaded in this process."""
    if algo is not None:
        return dict(_ALGORITHMS.get(algo, {}))
    return {n: m for declared_by in _ALGORITHMS.values() for n, m in declared_by.items()}


def declared(name: str, algo: str | None = None) -> bool:
    """Whether `name` is in the contract: shared, a power meter's, an actor process's, MLflow's
    system metrics, or the algorithm's (any loaded one's where `algo` is None)."""
    return (
        name in METRICS
        or name in OP_FRACS
        or name in source_metrics()
        or name in algorithm_metrics(algo)
        or per_process(name)
        or (name.startswith(SYSTEM_PREFIX) and len(name) > len(SYSTEM_PREFIX))
    )


def final_metric_names(algo: str | None = None) -> list[str]:
    """Names a job's final result carries (of algorithm `algo`): what search.objectives may name."""
    own = [n for n, m in algorithm_metrics(algo).items() if "final" in m.when]
    return sorted([n for n, m in METRICS.items() if "final" in m.when] + list(OP_FRACS) + list(source_metrics()) + own)
