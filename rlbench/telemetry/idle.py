"""The GPU's idle power before a sweep's first job (sweep.idle_power_s, rlbench/sweeps/warm.py): NVML's
board power of GPU 0 sampled for some seconds, as median (min..max); null with NVML's reason
where there is none to read. docs/gpu.md, "The study".
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def idle_power(source, seconds: float = 10.0, hz: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> dict:
    """{"value": median W, "low", "high", "n", "seconds"} of GPU 0 over `seconds` at `hz`, or
    {"value": None, "reason": ...} where NVML gave no power (`source`: an NvmlSource)."""
    if not source.available:
        return {"value": None, "reason": f"no NVML: {source.reason}"}
    watts = []
    for _ in range(max(1, round(seconds * hz))):
        samples = source.sample()
        if samples and samples[0].power_w is not None:
            watts.append(float(samples[0].power_w))
        sleep(1.0 / hz)
    if not watts:
        return {
            "value": None,
            "reason": f"NVML gave no power reading of GPU 0 in {seconds:g} s "
            f"({source.degraded_reason() or 'no reason given'})",
        }
    return {
        "value": statistics.median(watts),
        "low": min(watts),
        "high": max(watts),
        "n": len(watts),
        "seconds": seconds,
    }
