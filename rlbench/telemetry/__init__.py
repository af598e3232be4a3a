"""Hardware telemetry: GPU (NVML), CPU package/DRAM energy (RAPL), CPU utilisation (psutil).

`TelemetrySampler` samples them on a background thread and reduces the rows to the contract of
`rlbench.telemetry.summary`; the sources are declared in `rlbench.telemetry.sources`, where
another power meter is plugged in. docs/metrics.md, "Telemetry".
"""

from rlbench.telemetry.sampler import TelemetrySampler
from rlbench.telemetry.summary import ENERGY_SOURCES, SUMMARY_KEYS

__all__ = ["ENERGY_SOURCES", "SUMMARY_KEYS", "TelemetrySampler"]
