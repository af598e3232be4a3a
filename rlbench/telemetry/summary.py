"""Run-level telemetry summary computed from sampled rows (pure; no hardware).

Every key of SUMMARY_KEYS is always present, None where unknown (never 0 for unknown): the
energies, powers and utilisations, their sources (ENERGY_SOURCES) and degradation reasons.
How each value is chosen: docs/metrics.md, "Telemetry, inside".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from rlbench.telemetry.energy import (
    DEFAULT_IDLE_FRAC,
    cpu_energy_estimate,
    integrate_power,
    max_valid,
    mean_valid,
    span_valid,
)

Row = dict[str, Any]

SUMMARY_KEYS = (
    "energy_gpu_j", "energy_cpu_j", "energy_dram_j", "energy_per_task_j",
    "power_gpu_w_avg", "power_gpu_w_max", "power_cpu_w_avg", "gpu_util_avg", "cpu_util_avg",
    "energy_source_gpu", "energy_source_cpu", "telemetry_gpu_reason", "telemetry_cpu_reason",
)  # fmt: skip
ENERGY_SOURCES = frozenset({"nvml_counter", "nvml_power", "rapl", "estimate", "none"})
_WEAKNESS = {"nvml_counter": 0, "rapl": 0, "nvml_power": 1, "estimate": 2, "none": 3}
_GPU_KEY = re.compile(r"^gpu(\d+)_")


def column(rows: Sequence[Row], key: str) -> list[Any]:
    """One column, None where a row lacks it."""
    return [r.get(key) for r in rows]


def gpu_indices(rows: Sequence[Row]) -> list[int]:
    """GPU indices that appear in any row's keys."""
    return sorted({int(m.group(1)) for r in rows for k in r if (m := _GPU_KEY.match(k))})


def gpu_device_energy(
    times: Sequence[float], energy_mj: Sequence[float | None], power_w: Sequence[float | None]
) -> tuple[float | None, str]:
    """(joules, source) for one GPU: counter first, then power integration, else none."""
    counter = span_valid(energy_mj)
    if counter is not None:
        return counter / 1000.0, "nvml_counter"
    integral = integrate_power(times, power_w)
    if integral is not None:
        return integral, "nvml_power"
    return None, "none"


def row_gpu_power(row: Row, indices: Sequence[int]) -> float | None:
    """Summed GPU power of a row; None unless every GPU reported."""
    watts = [row.get(f"gpu{i}_power_w") for i in indices]
    known = [w for w in watts if w is not None]
    return float(sum(known)) if known and len(known) == len(watts) else None


def _join(notes: Sequence[str | None]) -> str | None:
    kept = [n for n in notes if n]
    return "; ".join(dict.fromkeys(kept)) or None


def gpu_summary(rows: Sequence[Row], notes: Sequence[str | None] = ()) -> Row:
    """GPU part of the contract; `notes` are the sources' degradation reasons."""
    times, indices = column(rows, "t"), gpu_indices(rows)
    notes = list(notes)
    per_device = {}
    for i in indices:
        energy_mj, power = column(rows, f"gpu{i}_energy_mj"), column(rows, f"gpu{i}_power_w")
        per_device[i] = gpu_device_energy(times, energy_mj, power)
        if per_device[i][1] == "nvml_power":
            notes.append(f"gpu{i} energy integrated from sampled power (no energy counter)")
        elif per_device[i][1] == "none":
            notes.append(f"gpu{i} has neither energy counter nor power readings")
    measured = [(e, s) for e, s in per_device.values() if e is not None]
    if not indices:
        notes.append("no GPU samples")
    power = [row_gpu_power(r, indices) for r in rows] if indices else []
    utils = [r.get(f"gpu{i}_util") for r in rows for i in indices]
    return {
        "energy_gpu_j": sum(e for e, _ in measured) if measured else None,
        "energy_source_gpu": max((s for _, s in measured), key=lambda s: _WEAKNESS[s], default="none"),
        "power_gpu_w_avg": mean_valid(power),
        "power_gpu_w_max": max_valid(power),
        "gpu_util_avg": mean_valid(utils),
        "telemetry_gpu_reason": _join(notes),
    }


def _rapl_energy(rows: Sequence[Row]) -> tuple[float | None, float | None]:
    """(package joules, seconds covered) from the cumulative RAPL column."""
    valid = [(r["t"], r["cpu_pkg_energy_j"]) for r in rows if r.get("cpu_pkg_energy_j") is not None]
    if len(valid) < 2:
        return None, None
    return valid[-1][1] - valid[0][1], valid[-1][0] - valid[0][0]


def cpu_summary(
    rows: Sequence[Row],
    notes: Sequence[str | None] = (),
    cpu_tdp_w: float | None = None,
    idle_frac: float = DEFAULT_IDLE_FRAC,
) -> Row:
    """CPU and DRAM part of the contract; the estimate is used only without RAPL readings."""
    notes = list(notes)
    times, util = column(rows, "t"), column(rows, "cpu_util")
    energy, covered = _rapl_energy(rows)
    source = "rapl" if energy is not None else "none"
    if energy is None and cpu_tdp_w is not None:
        energy = cpu_energy_estimate(util, times, cpu_tdp_w, idle_frac)
        covered = times[-1] - times[0] if energy is not None else None
        source = "estimate" if energy is not None else "none"
        notes.append(
            f"cpu energy is an estimate: P = {cpu_tdp_w:g} W * ({idle_frac:g} + {1 - idle_frac:g} * cpu_util)"
            if energy is not None
            else "too few cpu_util samples for the cpu energy estimate"
        )
    elif energy is None:
        notes.append("no RAPL readings and no cpu_tdp_w configured for an estimate")
    return {
        "energy_cpu_j": energy,
        "energy_dram_j": span_valid(column(rows, "dram_energy_j")),
        "energy_source_cpu": source,
        "power_cpu_w_avg": energy / covered if energy is not None and covered else None,
        "cpu_util_avg": mean_valid(util),
        "telemetry_cpu_reason": _join(notes),
    }


def summarize(
    rows: Sequence[Row],
    gpu_notes: Sequence[str | None] = (),
    cpu_notes: Sequence[str | None] = (),
    cpu_tdp_w: float | None = None,
    idle_frac: float = DEFAULT_IDLE_FRAC,
) -> Row:
    """The full contract dict of the built-in sources (keys in SUMMARY_KEYS order)."""
    parts = {**gpu_summary(rows, gpu_notes), **cpu_summary(rows, cpu_notes, cpu_tdp_w, idle_frac)}
    return combine(parts, ("energy_gpu_j", "energy_cpu_j", "energy_dram_j"))


def combine(parts: Row, energy_keys: Sequence[str]) -> Row:
    """The sources' parts with energy_per_task_j, the sum of their `energy_keys` that are known
    (None if none is): SUMMARY_KEYS first, then any other source's keys in their order."""
    known = [parts[k] for k in energy_keys if parts[k] is not None]
    parts = {**parts, "energy_per_task_j": sum(known) if known else None}
    return {k: parts[k] for k in SUMMARY_KEYS} | {k: v for k, v in parts.items() if k not in SUMMARY_KEYS}
