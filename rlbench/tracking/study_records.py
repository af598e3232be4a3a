"""The MLflow record of a sweep, a search or an experiment, as the report reads it.

One `JobRun` per child run in one `Study`, read through the tracking port
(rlbench/tracking/readers.py); `study_of(record)` builds it from plain data, so it is tested
without a store. docs/metrics.md, "The report, inside".
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from rlbench.core.metrics import IDLE_POWER
from rlbench.tracking.readers import NoSuchExperiment, RunRecord, SweepRecord, experiment_runs, read_sweep
from rlbench.tracking.unmeasured import TAG as UNMEASURED
from rlbench.tracking.unmeasured import unmeasured_of

WARMUP = ("role", "warmup")  # the tag of a discarded warm-up job (rlbench/sweeps/warm.py): never a job of a study
HOST_TAGS = ("host", "cpu_model", "hardware_threads", "gpu_name", "gpu_sm_count", "cuda_available")


@dataclass
class JobRun:
    run_id: str
    name: str
    status: str  # FINISHED, FAILED, KILLED, RUNNING (stale or still going)
    params: dict[str, str]
    metrics: dict[str, float]
    nulls: dict[str, str]  # metric -> why it was not measured (the job's `unmeasured` tag)
    tags: dict[str, str] = field(default_factory=dict)
    wall_s: float | None = None  # the run's end less its start (None while it runs)

    @property
    def finished(self) -> bool:
        return self.status == "FINISHED"

    def value(self, key: str) -> float | None:
        """A final metric, or None when the job did not log it (see `why_missing`)."""
        v = self.metrics.get(key)
        return v if v is not None and math.isfinite(v) else None

    def why_missing(self, key: str) -> str:
        if not self.finished:
            return f"job {self.status}"
        return self.nulls.get(key, "not logged by this job")

    def knob(self, key: str) -> float | None:
        """A numeric knob: the metric where the job logged one (granted, not requested), else the param."""
        v = self.value(key)
        if v is None:
            try:
                v = float(self.params.get(key))
            except (TypeError, ValueError):
                return None
        return v

    @property
    def actors(self) -> int | None:
        a = self.knob("actors")
        return None if a is None else int(a)

    @property
    def error(self) -> str | None:
        return self.tags.get("error") or self.tags.get("end_reason")

    @property
    def config(self) -> str:
        """The configuration this run repeats (its sweep's tag `repeat_group`, set with
        repeats=N), else its own name: one run per configuration."""
        return self.tags.get("repeat_group") or self.name


@dataclass
class PackRun:
    """One pack of a sweep (rlbench/sweeps/pack.py): K, its configuration, its repeat, its node
    figures (node/*) and, for those not measured, why."""

    k: int
    config: str
    repeat: int
    metrics: dict[str, float]
    nulls: dict[str, str]


def packs_of(runs) -> list[PackRun]:
    """The pack runs among `runs` (rlbench.role=pack), by K then configuration and repeat."""
    packs = [
        PackRun(
            int(r.tags.get("pack", 1)),
            r.tags.get("config", ""),
            int(r.tags.get("repeat", 0)),
            r.metrics,
            unmeasured_of(r.tags),
        )
        for r in runs
        if r.tags.get("rlbench.role") == "pack"
    ]
    return sorted(packs, key=lambda p: (p.k, p.config, p.repeat))


@dataclass
class Study:
    kind: str  # sweep, study (an Optuna search) or experiment
    title: str
    parent_id: str | None
    host: dict[str, str]
    jobs: list[JobRun]
    missing: list[str]  # planned jobs with no run at all, as text
    parent_tags: dict[str, str] = field(default_factory=dict)
    idle_power_w: float | None = None  # the GPU's idle power measured before a sweep's first job (median W)
    packs: list[PackRun] = field(default_factory=list)  # a sweep's packs (pack=K) and their node figures

    @property
    def frameskip(self) -> int | None:
        """The jobs' frameskip (env frames per agent step) when they share one."""
        skips = {j.params.get("env.frameskip") for j in self.jobs if j.params.get("env.frameskip")}
        return int(skips.pop()) if len(skips) == 1 else None

    @property
    def compute_unit(self) -> str:
        """What `sm_limit` granted in the finished jobs: SMs on CUDA, else CPU intra-op threads."""
        return "SM" if any(j.tags.get("compute_unit") == "sm" for j in self.finished) else "CPU intra-op thread"

    @property
    def without_gpu(self) -> bool:
        """Every finished job ran on the CPU (tagged compute_unit=cpu_thread): no CPU/GPU ratio to compare."""
        return without_gpu(j.tags.get("compute_unit") for j in self.finished)

    @property
    def finished(self) -> list[JobRun]:
        return [j for j in self.jobs if j.finished]

    @property
    def not_finished(self) -> list[JobRun]:
        return [j for j in self.jobs if not j.finished]

    def host_label(self) -> str:
        h = self.host
        gpu = f", {h['gpu_name']} ({h.get('gpu_sm_count', '?')} SMs)" if h.get("gpu_name") else ", no CUDA GPU"
        return f"{h.get('host', '?')}: {h.get('cpu_model', '?')}, {h.get('hardware_threads', '?')} HW threads{gpu}"


def without_gpu(compute_units: Iterable[str | None]) -> bool:
    """Whether finished jobs with these `compute_unit`s ran without a GPU, so that their CPU/GPU
    ratios cannot be compared: some job, and each granted CPU threads (cpu_thread), not SMs. The
    report's rule and the search's (rlbench/searches/parent.py)."""
    units = list(compute_units)
    return bool(units) and all(u == "cpu_thread" for u in units)


def _job(run: RunRecord) -> JobRun:
    return JobRun(
        run_id=run.run_id,
        name=run.name or run.run_id[:8],
        status=run.status,
        params=run.params,
        metrics=run.metrics,
        nulls=unmeasured_of(run.tags),
        tags={k: v for k, v in run.tags.items() if not k.startswith(("null/", "mlflow.")) and k != UNMEASURED},
        wall_s=run.wall_s,
    )


def is_job(tags: dict[str, str]) -> bool:
    """A job of the study: not a parent, a report or another role's run, nor a warm-up."""
    return "rlbench.role" not in tags and tags.get(WARMUP[0]) != WARMUP[1]


def _natural(name: str) -> list:
    """A name's sort key with its numbers as numbers: seed=23 before seed=10023 (not as text)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _ordered(jobs) -> list[JobRun]:
    return sorted(jobs, key=lambda j: (j.actors or 0, j.knob("sm_granted") or 0, _natural(j.name)))


def _host(tags: dict, jobs: list[JobRun]) -> dict[str, str]:
    source = dict(tags)
    for j in jobs:  # GPU tags are set by the jobs (the parent only has the launching host's)
        source = {**j.tags, **source} if j.finished else source
    return {k: source[k] for k in HOST_TAGS if k in source}


def _missing(summary: list[dict], jobs: list[JobRun], planned: int | None) -> list[str]:
    """Jobs of the parent's summary that have no run, and planned jobs the summary never got."""
    out, seen = [], {j.run_id for j in jobs}
    for r in summary:
        if not r.get("run_id") or r["run_id"] not in seen:
            out.append(f"job {r.get('job')} [{r.get('overrides')}]: {r.get('status')}, no run in this sweep")
    if planned is not None and len(jobs) + len(out) < planned:
        out.append(f"{planned - len(jobs) - len(out)} of {planned} planned jobs never started (no run, no summary row)")
    return out


def study_of(record: SweepRecord) -> Study:
    """A sweep's or a search's record (its parent, children and summary) as the report's Study."""
    parent = record.parent
    jobs = _ordered(_job(r) for r in record.children if is_job(r.tags))  # its warm-up and idle power are none
    planned = parent.params.get("jobs")
    return Study(
        kind=parent.tags.get("rlbench.role", "sweep"),
        title=parent.name or parent.run_id,
        parent_id=parent.run_id,
        host=_host(parent.tags, jobs),
        jobs=jobs,
        missing=_missing(record.summary, jobs, int(planned) if planned else None),
        parent_tags=parent.tags,
        idle_power_w=idle_power_of(record.children),
        packs=packs_of(record.children),
    )


def load_parent(parent_id: str) -> Study:
    """A sweep's or a search's parent run and its children (readers.NoSuchRun if it cannot be read)."""
    return study_of(read_sweep(parent_id))


def load_experiment(name: str) -> Study:
    """Every job run of an experiment (parents and reports left out), one study; LookupError
    when there is no such experiment."""
    try:
        runs = experiment_runs(name)
    except NoSuchExperiment as e:
        raise LookupError(f"--experiment {name!r}: no such MLflow experiment at {e.uri}") from None
    jobs = _ordered(_job(r) for r in runs if is_job(r.tags))
    return Study(
        kind="experiment",
        title=f"experiment {name}",
        parent_id=None,
        host=_host({}, jobs),
        jobs=jobs,
        missing=[],
        idle_power_w=idle_power_of(runs),
    )


def idle_power_of(runs) -> float | None:
    """The median of the idle GPU power the `idle power` runs among `runs` measured (a sweep with
    sweep.idle_power_s logs one: rlbench/sweeps/warm.py); None where none did."""
    watts = [
        r.metrics[IDLE_POWER]
        for r in runs
        if r.tags.get("rlbench.role") == "idle_power" and r.metrics.get(IDLE_POWER) is not None
    ]
    return statistics.median(watts) if watts else None
