"""The metric and operation names a job records: the contract logging, the sweep summary,
the report, the verdict and `search.objectives` share.

Each metric is declared once, with its unit, when it is logged and one line of meaning;
docs/metrics.md holds the longer story and `tests/test_metrics_contract.py` checks that the
two agree and that a real job logs nothing undeclared. Rename a metric here first.

`when`: "tick" = a step metric at every progress tick (step = frames), "final" = once at the
end (step = frames), "episode" = one value per finished episode (step = frames then).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    when: str
    doc: str


def _m(name: str, unit: str, when: str, doc: str) -> Metric:
    return Metric(name, unit, when, doc)


_TRAINING = [
    _m("fps", "env frames / s", "tick, final",
       "tick: frames in the window / its length; final: all frames / the actors' stepping time"),
    _m("sps", "agent steps / s", "tick, final", "fps / frameskip"),
    _m("learner_updates_per_s", "updates / s", "tick, final", "learner updates over the window, or its wall time"),
    _m("episode_return", "game score", "episode", "unclipped return of a training actor's episode"),
    _m("episode_return_mean20", "game score", "final", "mean of the last 20 episode_return values"),
    _m("eval_return", "game score", "episode", "unclipped return of a greedy evaluation env's episode"),
    _m("eval_return_mean20", "game score", "final", "mean of the last 20 eval_return values"),
    _m("eval_frames", "env frames", "final", "frames the evaluation envs stepped (not in frames or fps)"),
    _m("loss", "-", "tick, final", "the learner's last loss"),
    _m("replay_ratio", "samples / sequence", "tick, final", "sequences sampled / sequences inserted"),
    _m("task_replay_ratio", "samples / sequence", "final", "learner_updates x batch_size / the task's sequences"),
    _m("replay_capacity", "sequences", "final", "sequences replay holds"),
    _m("replay_memory_gb", "GB", "final", "memory of the replay storage"),
    _m("inference_batch_mean", "envs / forward", "tick, final", "mean environments per central inference call"),
    _m("inference_latency_ms", "ms", "tick, final", "mean wall time of one central inference call"),
    _m("policy_version", "updates", "tick, final", "the learner update whose weights inference acts with"),
    _m("runtime_s", "s", "final", "time to finish the task (frames and updates both met)"),
    _m("frames", "env frames", "tick, final", "frames the training actors stepped"),
    _m("learner_updates", "updates", "tick, final", "learner updates made"),
    _m("episodes", "count", "tick, final", "training episodes finished"),
    _m("replay_size", "sequences", "tick, final", "sequences in replay"),
    _m("cpu_gpu_ratio", "threads / unit", "final", "actor hardware threads / granted compute units"),
    _m("sm_granted", "units", "final", "compute units the learner and inference got"),
    _m("sm_total", "units", "final", "the device's compute units"),
    _m("actor_threads_used", "threads", "final", "CPU threads stepping environments"),
    _m("learner_intra_op_threads", "threads", "final", "torch intra-op threads of the learner thread"),
]

_TELEMETRY = [
    _m("energy_per_task_j", "J", "final", "sum of the known energy parts over the task"),
    _m("energy_gpu_j", "J", "final", "GPU energy over the task (NVML)"),
    _m("energy_cpu_j", "J", "final", "CPU package energy over the task (RAPL, or an estimate)"),
    _m("energy_dram_j", "J", "final", "DRAM energy over the task (RAPL)"),
    _m("power_gpu_w_avg", "W", "final", "mean GPU board power"),
    _m("power_gpu_w_max", "W", "final", "peak GPU board power"),
    _m("power_cpu_w_avg", "W", "final", "CPU package energy / time"),
    _m("perf_per_watt", "frames / s / W", "final", "fps / mean watts of the measured sources"),
    _m("joules_per_mframe", "J / 10^6 frames", "final", "energy_per_task_j per million frames"),
    _m("gpu_util_avg", "fraction", "final", "NVML utilisation"),
    _m("gpu_busy_frac", "fraction", "final", "union of CUDA-event spans / runtime_s"),
    _m("cpu_util_avg", "fraction", "final", "system-wide CPU utilisation"),
    _m("annotation_cost_us", "us", "final", "cost of one operation annotation"),
    _m("telemetry_samples", "count", "final", "telemetry rows sampled"),
    _m("telemetry_cpu_s", "s", "final", "CPU time of the telemetry sampler thread (its own cost)"),
    _m("power_gpu_w", "W", "tick", "GPU power, newest sample"),
    _m("power_cpu_w", "W", "tick", "CPU package power, newest sample"),
    _m("gpu_util", "fraction", "tick", "GPU utilisation, newest sample"),
    _m("cpu_util", "fraction", "tick", "CPU utilisation, newest sample"),
    _m("proc_cores_busy", "cores", "tick", "cores this job's process keeps busy"),
]

METRICS: dict[str, Metric] = {m.name: m for m in _TRAINING + _TELEMETRY}

# Operations per role, as each role's OpTimer names them; every role also has `other`.
OPS: dict[str, tuple[str, ...]] = {
    "actors": ("env_step", "inference", "rate_limited"),
    "inference": ("h2d_transfer", "forward", "d2h_transfer", "unroll_assembly", "initial_priority", "replay_insert"),
    "learner": ("wait", "replay_sample", "h2d_transfer", "stack_rebuild", "forward_backward", "optimizer_step",
                "replay_update", "publish"),
}
OTHER = "other"


def op_frac(role: str, op: str) -> str:
    """The metric name of a role's share of wall time in an operation."""
    return f"op_frac/{role}/{op}"


OP_FRACS: dict[str, Metric] = {
    op_frac(role, op): _m(op_frac(role, op), "fraction", "final", f"share of {role}' wall time in {op}")
    for role, ops in OPS.items() for op in (*ops, OTHER)
}


def declared(name: str) -> bool:
    return name in METRICS or name in OP_FRACS


def final_metrics() -> list[str]:
    """Names a job's final result carries: what search.objectives may name."""
    return sorted([n for n, m in METRICS.items() if "final" in m.when] + list(OP_FRACS))
