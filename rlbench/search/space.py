"""The search space and its rules: what may be searched on this host, the params of a trial,
the objectives read from a job's result, and the sampler."""

from __future__ import annotations

import math

import optuna

from rlbench.config.schema import SearchConfig
from rlbench.preflight import masked
from rlbench.resources import usable_cpus


class SearchError(ValueError):
    """A search that cannot run as configured; raised before the first trial."""


def check_space(search: SearchConfig, host_units: int) -> list[str]:
    """Problems with the search space against this host (empty if it is runnable)."""
    s, cpus, problems = search, len(usable_cpus()), []
    for key, bounds, top in (("actors", s.actors, None), ("actor_threads", s.actor_threads, cpus),
                             ("sm_limit", s.sm_limit, host_units)):
        bound = f", high <= {top} on this host" if top is not None else ""
        if len(bounds) != 2 or bounds[0] < 1 or bounds[1] < bounds[0] or (top is not None and bounds[1] > top):
            problems.append(f"search.{key}={list(bounds)}: allowed: [low, high] with 1 <= low <= high{bound}")
    if s.storage.startswith("sqlite") and s.workers > 1:
        problems.append(f"search.workers={s.workers} with SQLite storage {s.storage}: SQLite cannot take several "
                        "workers' writes reliably; use a PostgreSQL URL (postgresql://...)")
    elif s.workers > 1 and not s.storage.startswith("postgresql"):
        problems.append(f"search.workers={s.workers} with storage {masked(s.storage)}: allowed: a PostgreSQL URL "
                        "(postgresql://user:password@host:5432/db), whose lock keeps workers from "
                        "running more than search.n_trials")
    if s.workers < 1 or s.heartbeat_s < 1 or s.n_trials < 1:
        problems.append(f"search.workers={s.workers}, search.heartbeat_s={s.heartbeat_s}, "
                        f"search.n_trials={s.n_trials}: allowed: integers >= 1")
    if len(s.objectives) != len(s.directions) or not s.objectives:
        problems.append(f"search.objectives={list(s.objectives)} and search.directions={list(s.directions)}: "
                        "allowed: one direction per objective, at least one objective")
    if s.pruning and len(s.objectives) != 1:
        problems.append("search.pruning=true needs one objective (Optuna prunes single-objective studies only)")
    for d in s.directions:
        if d not in ("maximize", "minimize"):
            problems.append(f"search.directions: {d!r}: allowed: maximize or minimize")
    return problems


def suggest(trial: optuna.Trial, s: SearchConfig) -> dict[str, int]:
    """The trial's resources (log-uniform integers within the configured bounds)."""
    return {
        "actors": trial.suggest_int("actors", *s.actors, log=s.actors[1] > s.actors[0]),
        "actor_threads": trial.suggest_int("actor_threads", *s.actor_threads),
        "sm_limit": trial.suggest_int("sm_limit", *s.sm_limit),
    }


def objective_values(result: dict | None, objectives: list[str]) -> list[float] | None:
    """The job's objective metrics, or None when any is missing or not finite (trial FAIL)."""
    if not isinstance(result, dict):
        return None
    values = [result.get(name) for name in objectives]
    if any(v is None or not math.isfinite(v) for v in values):
        return None
    return [float(v) for v in values]


def make_sampler(s: SearchConfig, offset: int) -> optuna.samplers.BaseSampler:
    """The sampler for the next ask, seeded by the study's trial count: reproducible, and no two
    workers start from the same random stream (which would give them the same params)."""
    if len(s.objectives) == 1:
        return optuna.samplers.TPESampler(seed=s.seed + offset, constant_liar=s.workers > 1)
    return optuna.samplers.NSGAIISampler(seed=s.seed + offset)


def energy_check(conf) -> list[str]:
    """Energy objectives need a measured (or explicitly estimated) energy on this host."""
    if not any(k.startswith(("energy", "perf_per_watt", "joules")) for k in conf.search.objectives):
        return []
    from rlbench.telemetry.nvml import NvmlSource
    from rlbench.telemetry.rapl import RaplSource

    gpu, cpu = NvmlSource(), RaplSource()
    try:
        if gpu.available or cpu.available or conf.telemetry.cpu_tdp_w:
            return []
        return [(f"search.objectives={list(conf.search.objectives)}: no energy can be measured here (GPU: "
                 f"{gpu.reason}; CPU: {cpu.reason}); set telemetry.cpu_tdp_w=<watts> for a labelled estimate, "
                 "or search.objectives=[fps] search.directions=[maximize]")]
    finally:
        gpu.close()
