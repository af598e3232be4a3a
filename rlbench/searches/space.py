"""The search space and its rules: what may be searched on this host, the params of a trial,
the objectives read from a job's result, and the sampler (docs/scale-out.md, section 5)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna

from rlbench.config.schema import SearchConfig
from rlbench.core.algorithms import config_module
from rlbench.core.env_families import family
from rlbench.core.metrics import plugged_sources
from rlbench.core.resources import resolve_device, usable_cpus
from rlbench.prepare.plan import eval_envs_of
from rlbench.prepare.preflight import masked
from rlbench.telemetry.nvml import NvmlSource
from rlbench.telemetry.rapl import RaplSource


class SearchError(ValueError):
    """A search that cannot run as configured; raised before the first trial."""


def check_space(search: SearchConfig, host_units: int) -> list[str]:
    """Problems with the search space against this host (empty if it is runnable)."""
    cpus, problems = len(usable_cpus()), []
    for key, bounds, top in (
        ("actors", search.actors, None),
        ("actor_threads", search.actor_threads, cpus),
        ("sm_limit", search.sm_limit, host_units),
    ):
        bound = f", high <= {top} on this host" if top is not None else ""
        if len(bounds) != 2 or bounds[0] < 1 or bounds[1] < bounds[0] or (top is not None and bounds[1] > top):
            problems.append(f"search.{key}={list(bounds)}: allowed: [low, high] with 1 <= low <= high{bound}")
    if search.storage.startswith("sqlite") and search.workers > 1:
        problems.append(
            f"search.workers={search.workers} with SQLite storage {search.storage}: SQLite cannot take several "
            "workers' writes reliably; use a PostgreSQL URL (postgresql://...)"
        )
    elif search.workers > 1 and not search.storage.startswith("postgresql"):
        problems.append(
            f"search.workers={search.workers} with storage {masked(search.storage)}: allowed: a PostgreSQL URL "
            "(postgresql://user:password@host:5432/db), whose lock keeps workers from "
            "running more than search.n_trials"
        )
    if search.workers < 1 or search.heartbeat_s < 1 or search.n_trials < 1:
        problems.append(
            f"search.workers={search.workers}, search.heartbeat_s={search.heartbeat_s}, "
            f"search.n_trials={search.n_trials}: allowed: integers >= 1"
        )
    if len(search.objectives) != len(search.directions):
        problems.append(
            f"search.objectives={list(search.objectives)} and search.directions={list(search.directions)}: "
            "allowed: one direction per objective (both empty: the defaults, default_objectives)"
        )
    if search.pruning and search.objectives and len(search.objectives) != 1:
        problems.append("search.pruning=true needs one objective (Optuna prunes single-objective studies only)")
    for d in search.directions:
        if d not in ("maximize", "minimize"):
            problems.append(f"search.directions: {d!r}: allowed: maximize or minimize")
    return problems


def granted_space(search: SearchConfig, conf, cpus: int | None = None) -> str | None:
    """Narrows search.actor_threads to what the job's env family grants on this host (its
    hardware_threads: gym steps every env in one thread, so actor_threads_used is 1 whatever
    is asked), so no trial proposes threads it would not get; the line saying so, or None."""
    fam, cpus = family(conf.env.kind), cpus or len(usable_cpus())
    granted = [fam.hardware_threads(n, cpus) for n in search.actor_threads]
    if granted == list(search.actor_threads):
        return None
    asked, search.actor_threads = list(search.actor_threads), granted
    return (
        f"search.actor_threads={asked} searched as {granted}: what a {conf.env.kind} job is granted on this host "
        "(its actor_threads_used)"
    )


KNOBS = ("actors", "actor_threads", "sm_limit")  # what a trial searches, by the command line's names (suggest)
RAN_AS = {"actor_threads": "actor_threads_used", "sm_limit": "sm_granted"}  # the metric naming each as a job ran it


def knob_text(knobs: dict) -> str:
    """`actors=12 actor_threads=1 sm_limit=1`: knobs as the command line's overrides, in their
    order (an integral float as an integer; None, a value no run logged, as `unknown`)."""
    return " ".join(f"{k}={_knob_value(v)}" for k, v in knobs.items())


def _knob_value(v) -> str:
    if v is None:
        return "unknown"
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def suggest(trial: optuna.Trial, search: SearchConfig) -> dict[str, int]:
    """The trial's resources (log-uniform integers within the configured bounds)."""
    return {
        "actors": trial.suggest_int("actors", *search.actors, log=search.actors[1] > search.actors[0]),
        "actor_threads": trial.suggest_int("actor_threads", *search.actor_threads),
        "sm_limit": trial.suggest_int("sm_limit", *search.sm_limit),
    }


def objective_values(result: dict | None, objectives: list[str]) -> list[float] | None:
    """The job's objective metrics, or None when any is missing or not finite (trial FAIL)."""
    if not isinstance(result, dict):
        return None
    values = [result.get(name) for name in objectives]
    if any(v is None or not math.isfinite(v) for v in values):
        return None
    return [float(v) for v in values]


def make_sampler(search: SearchConfig, offset: int) -> optuna.samplers.BaseSampler:
    """The sampler for the next ask, seeded by the study's trial count: reproducible, and no two
    workers start from the same random stream (which would give them the same params)."""
    if len(search.objectives) == 1:
        return optuna.samplers.TPESampler(seed=search.seed + offset, constant_liar=search.workers > 1)
    return optuna.samplers.NSGAIISampler(seed=search.seed + offset)


@dataclass(frozen=True)
class Meters:
    """What this host can measure, as the job's telemetry will find it."""

    gpu: str | None  # None: NVML reads a GPU; else why not
    rapl: str | None  # None: RAPL reads the CPU package; else why not
    dram: str | None  # None: RAPL reads DRAM; else why not
    plugged: tuple[str, ...] = ()  # power meters plugged in (rlbench/telemetry/sources.py)


def host_meters() -> Meters:
    gpu, cpu = NvmlSource(), RaplSource()
    try:
        return Meters(
            None if gpu.available else gpu.reason or "NVML unavailable",
            None if cpu.available else cpu.reason or "RAPL unreadable",
            None if cpu.available and cpu.dram_available else cpu.dram_reason or cpu.reason or "no DRAM domain",
            tuple(plugged_sources()),
        )
    finally:
        gpu.close()


LEARNER_ONLY = ("learner_updates_per_s", "loss", "learner_share")
NVML_ONLY = ("power_gpu_w_avg", "power_gpu_w_max", "energy_gpu_j", "gpu_util_avg")


def _why_not(name: str, conf, m: Meters) -> str | None:
    """Why a job of `conf` on a host with meters `m` can never log final metric `name`, or None."""

    learns = config_module(conf.algo.name).LEARNS
    measured = m.gpu is None or m.rapl is None or bool(m.plugged)  # a power source that measures
    if name in LEARNER_ONLY and not (learns and conf.learner):
        return f"algo={conf.algo.name} has no learner" if not learns else "learner=false runs no learner"
    if name == "eval_return_mean20" and eval_envs_of(conf) == 0:
        return "eval_envs=0 steps no evaluation env" if learns else f"algo={conf.algo.name} does not evaluate"
    if name == "gpu_busy_frac" and resolve_device(conf.device).type != "cuda":
        return f"the job's device is {resolve_device(conf.device)}, not CUDA: no GPU spans to time"
    if name in NVML_ONLY and m.gpu is not None:
        return f"NVML reads no GPU here ({m.gpu})"
    if name in ("energy_cpu_j", "power_cpu_w_avg") and m.rapl is not None and not conf.telemetry.cpu_tdp_w:
        return f"no RAPL here ({m.rapl}) and no estimate: set telemetry.cpu_tdp_w=<watts> for a labelled one"
    if name == "energy_dram_j" and m.dram is not None:
        return f"RAPL reads no DRAM energy here ({m.dram})"
    if name == "perf_per_watt" and not measured:
        return (
            f"no power source measures here (GPU: {m.gpu}; CPU: {m.rapl}); perf_per_watt is fps per measured "
            "watt and leaves out telemetry.cpu_tdp_w's estimate"
        )
    if name in ("energy_per_task_j", "joules_per_mframe") and not measured and not conf.telemetry.cpu_tdp_w:
        return (
            f"no energy can be measured here (GPU: {m.gpu}; CPU: {m.rapl}); the ways out: a meter (NVML's GPU, "
            "RAPL, or a power source plugged in: docs/metrics.md) or telemetry.cpu_tdp_w=<watts> for a labelled "
            "estimate"
        )
    return None


ENERGY = ("energy_per_task_j", "joules_per_mframe", "energy_cpu_j", "power_cpu_w_avg")


def estimated(name: str, conf, m: Meters) -> bool:
    """Whether objective `name` is an estimate on this host: CPU energy from telemetry.cpu_tdp_w
    where no meter reads any (docs/metrics.md, the labelled estimate)."""
    return (
        name in ENERGY
        and bool(conf.telemetry.cpu_tdp_w)
        and m.rapl is not None
        and (name in ("energy_cpu_j", "power_cpu_w_avg") or (m.gpu is not None and not m.plugged))
    )


def default_objectives(conf, m: Meters) -> tuple[list[str], list[str], str | None]:
    """The search's objectives when none are set: the task's time first (runtime_s, minimised),
    then energy_per_task_j (minimised) where a job here can measure or estimate it; with the
    line that says why energy was left out, or None."""
    why = _why_not("energy_per_task_j", conf, m)
    if why:
        return ["runtime_s"], ["minimize"], f"objective runtime_s (minimise) only: energy_per_task_j left out: {why}"
    return ["runtime_s", "energy_per_task_j"], ["minimize", "minimize"], None


def objective_labels(conf, m: Meters) -> list[str]:
    """The objectives as tables, figures and the recommendation name them: "(estimate)" after
    one this host only estimates."""
    return [f"{n} (estimate)" if estimated(n, conf, m) else n for n in conf.search.objectives]


def objective_checks(conf, meters: Meters | None = None) -> list[str]:
    """Each objective the job cannot produce on this host and config (every trial would FAIL),
    named with why; checked before the first trial. meters: this host's (host_meters) when None."""
    names = list(conf.search.objectives)
    if not any(
        n in LEARNER_ONLY + NVML_ONLY or n.startswith(("energy", "power", "perf", "joules", "gpu", "eval"))
        for n in names
    ):
        return []  # nothing here depends on the host's meters: spare probing NVML and RAPL
    m = meters or host_meters()
    return [
        (
            f"search.objectives={names}: {n!r} cannot be produced by this job on this host: {why}; allowed: "
            "objectives the job logs here, e.g. fps, task_fps, runtime_s"
        )
        for n in names
        if (why := _why_not(n, conf, m))
    ]
