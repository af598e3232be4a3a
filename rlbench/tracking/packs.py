"""A pack's members as its node figures read them (rlbench/sweeps/pack.py): each member's
`window/fps` and power series with their wall-clock times, and its run's start and end; and the
pack's own run (`pack`, a child of the sweep's parent) that holds those figures.
"""

from __future__ import annotations

import dataclasses

import mlflow

from rlbench.tracking.store import log_alone
from rlbench.tracking.unmeasured import unmeasured_of

POWER = ("power_gpu_w", "power_cpu_w")  # each member samples the whole device: merged per device


@dataclasses.dataclass
class Members:
    fps: list[list[tuple[int, float]]]  # per member: (ms, window/fps)
    power: dict[str, list[tuple[int, float]]]  # per device's metric: every member's (ms, W) samples
    span: tuple[int, int]  # the pack's window: the first member's start to the last one's end (ms)
    energy_reason: str  # why a member measured no energy (its `unmeasured`), "" where one did
    threads: list[float | None]  # per member: actor_threads_used
    units: list[float | None]  # per member: sm_granted (SMs, or CPU threads without CUDA)
    own_units: bool  # whether each member's units are its own (MPS shares, CPU threads), not one shared GPU


def members(run_ids: list[str]) -> Members:
    client = mlflow.MlflowClient()
    fps, power, starts, ends, reasons = [], {k: [] for k in POWER}, [], [], []
    threads, units, sharing = [], [], set()
    for run_id in run_ids:
        run = client.get_run(run_id)
        starts.append(run.info.start_time)
        ends.append(run.info.end_time or run.info.start_time)
        fps.append([(m.timestamp, m.value) for m in client.get_metric_history(run_id, "window/fps")])
        for key in POWER:
            power[key] += [(m.timestamp, m.value) for m in client.get_metric_history(run_id, key)]
        reasons.append(unmeasured_of(run.data.tags).get("energy_per_task_j", ""))
        threads.append(run.data.metrics.get("actor_threads_used"))
        units.append(run.data.metrics.get("sm_granted"))
        sharing.add(run.data.tags.get("gpu_sharing", ""))
    why = next((r for r in reasons if r), "")
    own = sharing != {"time-slicing"}
    return Members(fps, {k: v for k, v in power.items() if v}, (min(starts), max(ends)), why, threads, units, own)


def log_on_members(run_ids: list[str], key: str, value: float) -> None:
    """A pack's figure logged on each of its jobs too (the report's jobs table shows it per job)."""
    client = mlflow.MlflowClient()
    for run_id in run_ids:
        client.log_metric(run_id, key, value)


def log_pack(uri: str, experiment: str, parent: str, tags: dict, metrics: dict, nulls: dict) -> str:
    """The pack's run under the sweep's parent (rlbench.role=pack): its node figures."""
    return log_alone(
        uri,
        experiment,
        f"pack {tags['pack_id']}",
        {"rlbench.role": "pack", "mlflow.parentRunId": parent} | tags,
        {k: v for k, v in metrics.items() if v is not None},
        nulls,
    )
