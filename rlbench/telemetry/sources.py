"""The telemetry sources the sampler reads, one declaration each, and the registry of power meters.

A `Source` says how its meter is made, the row columns of a reading, its degradation notes and
its part of the summary; the sampler and the job's telemetry iterate over `sources()`. Built in:
"gpu", "cpu", "rapl"; other meters come in by `register` or RLBENCH_POWER_SOURCES. docs/metrics.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Protocol

from rlbench.core.metrics import METRICS, POWER_SOURCES_ENV, plug_source, unplug_source
from rlbench.core.registry import Registry, RegistryError, load_target
from rlbench.telemetry import nvml
from rlbench.telemetry.cpu import CpuSource
from rlbench.telemetry.energy import DEFAULT_IDLE_FRAC, integrate_power, mean_valid, span_valid
from rlbench.telemetry.rapl import RaplSource
from rlbench.telemetry.summary import Row, column, cpu_summary, gpu_summary

ENV_VAR = POWER_SOURCES_ENV
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@cache
def column_name(prefix: str, index: int, metric: str) -> str:
    """A shared column name string ("gpu0_power_w"), so rows do not each hold copies."""
    return f"{prefix}{index}_{metric}"


@dataclass(frozen=True)
class SourceContext:
    """What the sampler knows that a source may need: its clock and the CPU estimate's settings."""

    clock: Callable[[], float]
    cpu_tdp_w: float | None = None
    cpu_idle_frac: float = DEFAULT_IDLE_FRAC


class Source:
    """One telemetry source. `name` prefixes its sampling errors and notes; `side` is the
    reason its notes join ("gpu" and "cpu" are the tags telemetry_gpu_reason / _cpu_reason)."""

    name: ClassVar[str]
    side: ClassVar[str]
    tail_prefix: ClassVar[str | None] = None  # columns starting with it go last in a row
    energy_keys: ClassVar[tuple[str, ...]] = ()  # keys of account() that add into energy_per_task_j
    reason_attrs: ClassVar[tuple[str, ...]] = ("reason",)  # the meter's own degradation notes

    def make(self, ctx: SourceContext) -> Any:
        """A new meter (owned by the sampler, closed by its stop())."""
        raise NotImplementedError

    def fields(self, sample: Any) -> Row:
        """Row columns of one reading."""
        raise NotImplementedError

    def notes(self, meter: Any, failure: str | None) -> list[str]:
        """Degradation notes: the meter's own reasons, then its sampling failures."""
        notes = [r for a in self.reason_attrs if isinstance(r := getattr(meter, a, None), str)]
        return notes + ([failure] if failure else [])

    def account(self, rows: Sequence[Row], notes: list[str], ctx: SourceContext) -> Row:
        """Its part of the summary (every key always present, None where unknown)."""
        return {}

    def watts(self, summary: Row) -> float | None:
        """Its measured mean power in the summary (perf_per_watt); None where not a measurement."""
        return None

    def reasons(self, summary: Row) -> dict[str, str]:
        """{reason key: the energy it explains} in the summary: a tag where that energy was
        measured with a caveat, else the reason in the `unmeasured` tag."""
        return {}

    def unmeasured(self, summary: Row) -> dict[str, str]:
        """{metric: why it is None} for its own metrics (the built-in ones are explained by side)."""
        return {}


class PowerReading(Protocol):
    watts: float | None
    energy_j: float | None


@dataclass(frozen=True)
class Reading:
    """One reading of a plugged-in power meter: power now (W) and/or a cumulative energy counter (J)."""

    watts: float | None = None
    energy_j: float | None = None


class PowerMeter(Protocol):
    def sample(self) -> PowerReading: ...


class MeterSource(Source):
    """A plugged-in power meter: columns power_<name>_w and energy_<name>_j; its energy is the
    counter's span where it has one (2 readings or more), else the integral of its power."""

    side = ""  # its own name

    def __init__(self, name: str, meter: str | Callable[[], PowerMeter]) -> None:
        self.name, self.side, self._meter = name, name, meter  # type: ignore[misc]
        self.power_col, self.energy_col = f"power_{name}_w", f"energy_{name}_j"
        self.energy_keys = (f"energy_{name}_j",)  # type: ignore[misc]

    def make(self, ctx: SourceContext) -> PowerMeter:
        meter = self._meter
        return (load_target(meter) if isinstance(meter, str) else meter)()

    def fields(self, sample: PowerReading) -> Row:
        return {self.power_col: sample.watts, self.energy_col: sample.energy_j}

    def account(self, rows: Sequence[Row], notes: list[str], ctx: SourceContext) -> Row:
        times, watts = column(rows, "t"), column(rows, self.power_col)
        energy = span_valid(column(rows, self.energy_col))
        if energy is None:
            energy = integrate_power(times, watts)
        if energy is None:
            notes = [*notes, f"{self.name} gave fewer than 2 readings"]
        return {
            f"energy_{self.name}_j": energy,
            f"power_{self.name}_w_avg": mean_valid(watts),
            f"telemetry_{self.name}_reason": "; ".join(dict.fromkeys(n for n in notes if n)) or None,
        }

    def watts(self, summary: Row) -> float | None:
        return summary[f"power_{self.name}_w_avg"]

    def reasons(self, summary: Row) -> dict[str, str]:
        return {f"telemetry_{self.name}_reason": f"energy_{self.name}_j"}

    def unmeasured(self, summary: Row) -> dict[str, str]:
        why = summary[f"telemetry_{self.name}_reason"] or f"no {self.name} power measured"
        return dict.fromkeys((f"energy_{self.name}_j", f"power_{self.name}_w_avg"), why)


class GpuSource(Source):
    """GPU power, energy counter, utilisation, clocks, memory, temperature (NVML)."""

    name = side = "gpu"
    energy_keys = ("energy_gpu_j",)
    reason_attrs = ("degraded_reason",)
    METRICS = ("power_w", "energy_mj", "util", "mem_util", "sm_clock_mhz", "mem_used_mb", "temp_c")

    def make(self, ctx: SourceContext) -> Any:
        return nvml.NvmlSource()

    def fields(self, sample: Any) -> Row:
        return {column_name("gpu", s.index, m): getattr(s, m) for s in sample for m in self.METRICS}

    def account(self, rows: Sequence[Row], notes: list[str], ctx: SourceContext) -> Row:
        return gpu_summary(rows, notes)

    def watts(self, summary: Row) -> float | None:
        return summary["power_gpu_w_avg"]

    def reasons(self, summary: Row) -> dict[str, str]:
        return {"telemetry_gpu_reason": "energy_gpu_j"}


class CpuUtilSource(Source):
    """System, per-core and process-tree CPU utilisation (psutil); per-core columns go last."""

    name = side = "cpu"
    tail_prefix = "cpu_core"
    reason_attrs = ()

    def make(self, ctx: SourceContext) -> Any:
        return CpuSource(clock=ctx.clock)

    def fields(self, sample: Any) -> Row:
        row: Row = {"cpu_util": sample.util, "proc_util": sample.proc_util, "proc_cores_busy": sample.proc_cores_busy}
        return row | {column_name("cpu_core", k, "util"): u for k, u in enumerate(sample.per_core)}


class RaplEnergySource(Source):
    """CPU package and DRAM energy (RAPL); without readings, the estimate from cpu_util."""

    name, side = "rapl", "cpu"
    energy_keys = ("energy_cpu_j", "energy_dram_j")
    reason_attrs = ("reason", "dram_reason")

    def make(self, ctx: SourceContext) -> Any:
        return RaplSource()

    def fields(self, sample: Any) -> Row:
        return {"cpu_pkg_energy_j": sample.pkg_energy_j, "dram_energy_j": sample.dram_energy_j}

    def notes(self, meter: Any, failure: str | None) -> list[str]:
        notes = super().notes(meter, failure)
        if getattr(meter, "dropped", 0):
            notes.append(f"{meter.dropped} RAPL deltas dropped (wrap with unknown max_energy_range_uj)")
        return notes

    def account(self, rows: Sequence[Row], notes: list[str], ctx: SourceContext) -> Row:
        return cpu_summary(rows, notes, ctx.cpu_tdp_w, ctx.cpu_idle_frac)

    def watts(self, summary: Row) -> float | None:
        return summary["power_cpu_w_avg"] if summary["energy_source_cpu"] == "rapl" else None  # not an estimate

    def reasons(self, summary: Row) -> dict[str, str]:
        return {"telemetry_cpu_reason": "energy_cpu_j"}


BUILT_IN: dict[str, Source] = {s.name: s for s in (GpuSource(), CpuUtilSource(), RaplEnergySource())}


class PowerSourceError(RegistryError, ValueError):
    """A power meter rlbench cannot plug in: a bad or taken name, or a bad RLBENCH_POWER_SOURCES."""


class MeterFactory(Protocol):
    """What a power source registers: a zero-argument callable making a `PowerMeter`."""

    def __call__(self) -> PowerMeter: ...


def _check_name(name: str) -> None:
    if name in BUILT_IN or not _NAME.match(name):
        raise PowerSourceError(
            f"power source {name!r}: a name is lower-case [a-z][a-z0-9_]* and not one of "
            f"the built-in sources ({', '.join(BUILT_IN)})"
        )
    taken = [m for m in (f"energy_{name}_j", f"power_{name}_w_avg", f"power_{name}_w") if m in METRICS]
    if taken:
        raise PowerSourceError(f"power source {name!r}: its metric {taken[0]} is already a built-in metric")


METERS: Registry[MeterFactory] = Registry(
    "power source",
    "power source",
    MeterFactory,
    {},
    ENV_VAR,
    PowerSourceError,
    check=lambda name, f: [] if callable(f) else ["a zero-argument callable"],
)


def _from_env(value: str) -> dict[str, Source]:
    """{name: MeterSource} of RLBENCH_POWER_SOURCES's value (the meters load when sampled)."""
    out: dict[str, Source] = {}
    for name, path in METERS.parse_env(value).items():
        if ":" not in path:
            raise PowerSourceError(f"{ENV_VAR}={value!r}: {name}={path!r} is not name=module:attr")
        _check_name(name)
        out[name] = MeterSource(name, path)
    return out


_from_env(os.environ.get(ENV_VAR, ""))  # a bad variable is refused when telemetry loads


def register(name: str, meter: str | Callable[[], PowerMeter]) -> None:
    """Plug in the power meter `meter` (a factory, or its "module:attr") as source `name`: checked now."""
    _check_name(name)
    METERS.register(name, meter)
    plug_source(name)


def unregister(name: str) -> None:
    """Forget a meter added with register() (tests); the built-in sources stay."""
    METERS.unregister(name)
    unplug_source(name)


def sources() -> list[Source]:
    """Every source the sampler reads, the built-in ones first."""
    return [*BUILT_IN.values(), *(MeterSource(name, lambda name=name: METERS.get(name)()) for name in METERS)]


def plugged() -> list[str]:
    """Names of the plugged-in power meters."""
    return list(METERS)
