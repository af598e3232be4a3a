"""The peak TFLOP/s a job's achieved rate is compared with (`learner_mfu`, `inference_mfu`):
NVIDIA's published dense figure for a known GPU (rlbench/core/precision.py), else the newest complete
profile of this host with a GEMM at the precision; neither: None and why. docs/precision.md.
"""

from __future__ import annotations

import mlflow

from rlbench.core.precision import published_peak
from rlbench.tracking.profiles import COMPLETE, EXPERIMENT, ROLE


def peak_metric(precision: str) -> str:
    """The profile's metric holding its measured GEMM peak at `precision`."""
    return f"peak_tflops/{precision}"


def host_peak(
    precision: str, device_type: str, device_name: str, host: str, experiment: str = EXPERIMENT
) -> tuple[float | None, str]:
    """(TFLOP/s, where it comes from), or (None, why there is none)."""
    published = published_peak(device_name, precision) if device_type == "cuda" else None
    if published is not None:
        return published
    if mlflow.get_experiment_by_name(experiment) is not None:
        runs = mlflow.search_runs(
            experiment_names=[experiment],
            output_format="list",
            order_by=["attributes.start_time DESC"],
            filter_string=(
                f"tags.`rlbench.role` = '{ROLE}' and attributes.status = 'FINISHED' and tags.host = '{host}' "
                f"and tags.profile_device = '{device_type}'"
            ),
        )
        for run in runs:
            value = run.data.metrics.get(peak_metric(precision))
            if run.data.tags.get(COMPLETE) != "false" and value:
                return value, f"measured: a {precision} GEMM in profile run {run.info.run_id} of this host"
    return None, (
        f"no published {precision} peak for {device_name} and no profile of host {host} in experiment "
        f"{experiment} measured one (python -m rlbench.profile precision={precision})"
    )
