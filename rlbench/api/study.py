"""`rlbench.study(...)`: the study's stages (experiment presets conf/experiment/study_*.yaml) as
sweeps in order, the later ones at the actor stage's best count, values this host cannot run left
out with the reason; all in one experiment (`study-<env>`), so resume=true continues a stopped
study from its store and one report reads every job, whichever host ran it. pipelines/study.py is
its command; docs/gpu.md, "The study".
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

from rlbench.api.report import Report, make_report
from rlbench.api.study_host import StudyHost, left_out, on_host, probe, sized_frames
from rlbench.api.sweep import sweep
from rlbench.core.errors import Refusal
from rlbench.prepare.compose import compose_checked, compose_config
from rlbench.sweeps.sweep import SweepResult
from rlbench.tracking.store import use_store
from rlbench.tracking.study_records import load_experiment

STAGES = ("actors", "sms", "cpu", "precision")
PRESETS = {"actors": "study_actors", "sms": "study_sms", "cpu": "study_threads", "precision": "study_precision"}
# seconds-long CartPole jobs: the study's whole path on any host, a rehearsal, not a result
TINY = [
    "env=cartpole",
    "workload.frames=1500",
    "workload.learner_updates=2",
    "algo.min_replay=16",
    "eval_envs=0",
    "telemetry.rate_hz=2",
    "sweep.idle_power_s=0.5",
]
TINY_ACTORS = "4,8"


@dataclasses.dataclass
class StageRun:
    """One stage as the study ran it (or, in a dry run, would): its overrides, its jobs' knobs,
    what was left out and why, and the sweep's result."""

    name: str
    overrides: list[str]  # the sweep's: `common` and the grid's lists
    jobs: list[str]  # each configuration's knobs, e.g. `actors=4`
    left_out: list[str]
    common: list[str] = dataclasses.field(default_factory=list)  # every job's: the preset, the study's, the user's
    sizing: str = ""  # how the jobs' frames were chosen
    result: SweepResult | None = None


@dataclasses.dataclass
class StudyResult:
    """The study's stages, the best actor count, the report over every job, and which jobs ran on
    which host (from each run's fingerprint tags)."""

    experiment: str
    tracking_uri: str
    stages: list[StageRun]
    best_actors: int | None
    report: Report | None
    hosts: list[dict]  # per job run: stage, name, status, host, cpu_model, gpu_name

    def as_dict(self) -> dict:
        return {
            "experiment": self.experiment,
            "tracking_uri": self.tracking_uri,
            "best_actors": self.best_actors,
            "stages": [
                {
                    "stage": s.name,
                    "overrides": s.overrides,
                    "jobs": s.jobs,
                    "left_out": s.left_out,
                    "sizing": s.sizing,
                    "parent_run_id": s.result.parent_run_id if s.result else None,
                    "status": s.result.status if s.result else "NOT STARTED",
                }
                for s in self.stages
            ],
            "report": str(self.report.html) if self.report else None,
            "verdict": self.report.lines if self.report else [],
            "hosts": self.hosts,
        }


def base_overrides(overrides: list[str], tiny: bool, repeats: int | None) -> list[str]:
    """What every stage's sweep shares: the rehearsal's task, the repeats asked, then the user's."""
    return [*(TINY if tiny else []), *([f"repeats={repeats}"] if repeats else []), *overrides]


def stage_grid(stage: str, host: StudyHost, base: list[str], best: int | None, tiny: bool) -> StageRun:
    """The stage's preset and its grid on this host: the preset's values less those the host
    cannot run (left_out), the later stages at the best actor count. Its frames: the preset's
    (sized_frames may raise them)."""
    preset = PRESETS[stage] if stage != "sms" or host.cuda else "study_sms_cpu"
    common = [f"experiment={preset}", *base, *([f"actors={best}"] if best is not None and stage != "actors" else [])]
    params = dict(compose_config(common, hydra_node=True).hydra.sweeper.params or {})
    if stage == "actors" and tiny:
        params["actors"] = TINY_ACTORS
    if stage == "sms" and host.cuda and host.units:
        params["sm_limit"] = ",".join(dict.fromkeys(["null", str(host.half_units()), "16", "8"]))
    kept: dict[str, list[str]] = {}
    notes: list[str] = []
    for key, values in params.items():
        kept[key] = []
        for asked in str(values).split(","):
            value, changed = on_host(host, key, asked)
            why = left_out(host, common, key, value)
            kept[key] += [] if why or value in kept[key] else [value]
            notes += [n for n in (changed, why) if n]
    overrides = [*common, *(f"{k}={','.join(v)}" for k, v in kept.items() if v)]
    jobs = [
        " ".join(f"{k}={v}" for k, v in zip(kept, combo, strict=True)) for combo in itertools.product(*kept.values())
    ]
    return StageRun(stage, overrides, jobs if all(kept.values()) else [], notes, common, "the preset's frames")


def sized(run: StageRun, uri: str, steady_s: float) -> StageRun:
    """The stage with its frames raised to hold `steady_s` of steady windows where this host's
    profile predicts so (rlbench/api/study_host.py sized_frames); else as it is, saying why."""
    if steady_s <= 0 or not run.jobs:
        return run
    pinned, how = sized_frames(run.common, run.jobs, uri, steady_s)
    how += f": {' '.join(pinned)}" if pinned else ""
    return dataclasses.replace(run, overrides=run.overrides + pinned, common=run.common + pinned, sizing=how)


def best_actors(result: SweepResult | None) -> int | None:
    """The actor count of the verdict's best configuration (None where none finished)."""
    if result is None or result.verdict.best is None:
        return None
    for row in result.rows:
        if row.get("config") == result.verdict.best:
            return int(next(o for o in row["overrides"].split() if o.startswith("actors=")).split("=", 1)[1])
    return None


def run_stages(
    host: StudyHost, stages: list[str], base: list[str], tiny: bool, dry: bool, steady: tuple[str, float]
) -> tuple[list[StageRun], int | None]:
    """Each stage's sweep in order (a dry run: the plans only), and the best actor count; the
    later stages run at it (without an actor stage that finished, at their preset's). steady:
    (the store, the steady seconds each job should hold: sized)."""
    done, best = [], None
    for stage in stages:
        run = sized(stage_grid(stage, host, base, best, tiny), *steady)
        if run.jobs and not dry:
            run.result = sweep(run.overrides)
        if stage == "actors" and run.result is not None:
            best = best_actors(run.result)
        done.append(run)
    return done, best


def job_hosts(experiment: str, stages: list[StageRun]) -> list[dict]:
    """Which host ran each job of the study (the fingerprint tags its run records)."""
    stage_of = {r["run_id"]: s.name for s in stages if s.result for r in s.result.rows if r.get("run_id")}
    try:
        jobs = load_experiment(experiment).jobs
    except LookupError:
        return []
    keys = ("host", "cpu_model", "gpu_name")
    return [
        {"stage": stage_of.get(j.run_id), "name": j.name, "status": j.status, **{k: j.tags.get(k) for k in keys}}
        for j in jobs
    ]


def study(
    stages: list[str] | tuple[str, ...] = STAGES,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    tiny: bool = False,
    repeats: int | None = None,
    out: Path | str | None = None,
    dry_run: bool = False,
    steady_s: float = 20.0,
) -> StudyResult:
    """The study's stages in order under `overrides` (`resume=true` continues a stopped study),
    then the report over every job of its experiment under `out` (default reports/<experiment>),
    and summary.json there. dry_run: the stages' jobs and what was left out, nothing run.
    steady_s: each stage's frames raised to hold this many seconds of steady windows where this
    host's profile predicts so (0: the presets' frames; the task is 20 learner updates either way).
    Refusal for an unknown stage or a bad override, before any job."""
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise Refusal(f"stages={','.join(stages) or '(none)'}: allowed: one or more of {', '.join(STAGES)}, in order")
    base = base_overrides(list(overrides), tiny, repeats)
    first = compose_checked([f"experiment={PRESETS[stages[0]]}", *base])  # a bad override: a refusal, now
    host = probe(first)
    experiment, uri = first.tracking.experiment, first.tracking.uri
    ran, best = run_stages(host, [s for s in STAGES if s in stages], base, tiny, dry_run, (uri, steady_s))
    if dry_run or not any(s.result for s in ran):
        return StudyResult(experiment, uri, ran, best, None, [])
    folder = Path(out) if out is not None else Path("reports") / experiment
    report = make_report(experiment=experiment, tracking_uri=uri, out=folder)
    use_store(uri)
    result = StudyResult(experiment, uri, ran, best, report, job_hosts(experiment, ran))
    (folder / "summary.json").write_text(json.dumps(result.as_dict(), indent=2, default=str))
    return result
