"""The `unmeasured` tag: which values a run could not measure, and why, each reason once.

A value that cannot be known is never logged as a number; the run gets one short tag instead,
`energy_gpu_j, power_gpu_w_avg: no GPU samples | energy_cpu_j: no RAPL readings`, written
and parsed back here. docs/metrics.md, "Telemetry".
"""

from __future__ import annotations

TAG = "unmeasured"
_GROUPS, _NAMES = " | ", ", "

# values derived from measured power: their reason points at the power sources' reasons
DERIVED = dict.fromkeys(("energy_per_task_j", "perf_per_watt", "joules_per_mframe"), ("energy_cpu_j", "energy_gpu_j"))


def format_unmeasured(reasons: dict[str, str]) -> str:
    """The tag's value for {metric: reason} (metric order kept within and across groups)."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in reasons.items():
        clean = " ".join(str(reason).replace("|", "/").split()) or "unknown"
        by_reason.setdefault(clean, []).append(name)
    return _GROUPS.join(f"{_NAMES.join(names)}: {reason}" for reason, names in by_reason.items())


def parse_unmeasured(text: str | None) -> dict[str, str]:
    """{metric: reason} from the tag's value (empty for None or '')."""
    out: dict[str, str] = {}
    for group in (text or "").split(_GROUPS):
        names, sep, reason = group.partition(": ")
        if sep:
            out |= dict.fromkeys((n.strip() for n in names.split(",") if n.strip()), reason)
    return out


def unmeasured_of(tags: dict[str, str]) -> dict[str, str]:
    """{metric: reason} of a run's tags: the `unmeasured` tag, and the per-value `null/<metric>` tags
    some runs carry instead."""
    old = {k.removeprefix("null/"): v for k, v in tags.items() if k.startswith("null/")}
    return old | parse_unmeasured(tags.get(TAG))


def explain(name: str, reasons: dict[str, str]) -> str | None:
    """`name`'s reason followed by the reasons of the values it derives from (a table that
    shows only `energy_per_task_j` still says why the CPU and GPU energies are missing)."""
    if name not in reasons:
        return None
    return "; ".join([reasons[name], *(f"{src}: {reasons[src]}" for src in DERIVED.get(name, ()) if src in reasons)])
