"""What a sweep does in its own process before its first job (`sweep.idle_power_s`,
`sweep.warmup`: rlbench/config/schema.py SweepOptions): the GPU's idle power, logged as a child
run of the parent, then one discarded warm-up job of the first job's configuration, so that every
measured job finds the process warm (its imports, CUDA's context, compiled kernels, the env shelf).
Both are taken again when resume=true continues a sweep. docs/gpu.md, "The study".
"""

from __future__ import annotations

import json

from hydra.core.utils import JobStatus

from rlbench.core.errors import Failure
from rlbench.core.metrics import IDLE_POWER
from rlbench.prepare.grid import in_process
from rlbench.prepare.hydra_private import failure
from rlbench.prepare.job import handing
from rlbench.telemetry.idle import idle_power
from rlbench.telemetry.nvml import NvmlSource
from rlbench.tracking.store import log_alone
from rlbench.tracking.study_records import WARMUP

WARMUP_NAME = "warmup"


def options_problem(options, launcher) -> str | None:
    """A warm-up asked for where the jobs run in a launcher's own processes: the refusal's text."""
    if options.warmup and not in_process(launcher):
        return (
            f"sweep.warmup=true with {type(launcher).__name__}: allowed with the basic launcher only "
            "(jobs in this process, which the warm-up warms); a launcher's processes would each need their own"
        )
    return None


def measure_idle(tracking, parent_id: str, seconds: float) -> dict:
    """NVML's idle board power of GPU 0 over `seconds`, logged as the run `idle power` under the
    parent (idle_power_gpu_w, or null with the reason); the measurement's dict."""
    source = NvmlSource()
    try:
        idle = idle_power(source, seconds)
    finally:
        source.close()
    measured = idle["value"] is not None
    log_alone(
        tracking.uri,
        tracking.experiment,
        "idle power",
        {"rlbench.role": "idle_power", "mlflow.parentRunId": parent_id},
        {IDLE_POWER: idle["value"]} if measured else {},
        {} if measured else {IDLE_POWER: idle["reason"]},
    )
    print(f"[rlbench sweep] idle GPU power: {json.dumps(idle)}", flush=True)
    return idle


def warm_up(launcher, overrides: list[str], config, index: int) -> None:
    """The warm-up job: `overrides` (the first job's, pinned to the parent, named `warmup` and
    tagged role=warmup) launched as the sweep launches a job, its validated `config` handed to it.
    Failure where it failed: nothing after it would run warm."""
    print(f"[rlbench sweep] warm-up job (discarded): {' '.join(overrides)}", flush=True)
    with handing({tuple(overrides): config}):
        ret = launcher.launch([overrides], initial_job_idx=index)[0]
    if ret.status != JobStatus.COMPLETED:
        err = failure(ret)
        raise Failure(f"the warm-up job failed ({type(err).__name__}: {err}): no job ran (none would be warm)")


def warm_tags() -> dict[str, str]:
    """The warm-up job's tags (tracking/study_records.py WARMUP: never a job of a study)."""
    return {WARMUP[0]: WARMUP[1]}
