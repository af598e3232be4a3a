"""A sweep (Hydra multirun) as rlbench runs it: validate all, one MLflow parent, isolated jobs.

Called by the `rlbench` Hydra sweeper (hydra_plugins/rlbench_sweeper). The store is reached only
through the tracking port (`store`: tracking.experiment.Experiment), so tests run it all with a
fake. Its steps: docs/jobs.md, "A sweep's steps"; what it records: docs/metrics.md.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import logging
import os
import uuid

from hydra.core.utils import JobStatus

from rlbench.config.schema import TrackingConfig
from rlbench.core.errors import Failure, Refusal
from rlbench.core.repeats import STAT_METRICS, Spread, config_key, config_rows, repeated
from rlbench.core.resources import usable_cpus
from rlbench.core.verdict import DEFAULT_METRIC, FLOOR_MIN_TAG, METRIC_TAG, RECORDED, Result, Verdict, rows_result
from rlbench.prepare.grid import in_process
from rlbench.prepare.hydra_private import failure
from rlbench.prepare.job import handing
from rlbench.prepare.preflight import check
from rlbench.sweeps.pack import close_packs, expand, pack_launcher
from rlbench.sweeps.warm import WARMUP_NAME, measure_idle, options_problem, warm_tags, warm_up
from rlbench.tracking.experiment import Experiment
from rlbench.tracking.parent import SWEEP_KEY, ParentRun, live
from rlbench.tracking.parent_note import answer_lines, summary_metrics, sweep_note, verdicts
from rlbench.tracking.readers import RunRecord
from rlbench.tracking.record import param_names, rounded
from rlbench.tracking.store import config_hash, run_name_from, ui_hint
from rlbench.tracking.study_records import is_job
from rlbench.tracking.unmeasured import explain, unmeasured_of
from rlbench.tracking.views import BEST_TAG, BOUND_TAG, HEADLINE, REPEAT_GROUP, VERDICT_TAG, knobs_of

log = logging.getLogger(__name__)

SUMMARY_COLUMNS = (
    "job",
    "name",
    "config",
    "repeat",
    "overrides",
    "status",
    "runtime_s",
    "task_fps",
    "fps",
    "energy_per_task_j",
    "cpu_gpu_ratio",
    "run_id",
    "verdict",
)
_VALUES = (
    "runtime_s",
    "task_fps",
    "fps",
    "energy_per_task_j",
    "cpu_gpu_ratio",
    "run_id",
)  # what a finished job returns
_KEPT = (*_VALUES, *RECORDED)  # a row keeps what a verdict may compare, windows' range too (core/verdict.py)
_PRINTED = tuple(c for c in SUMMARY_COLUMNS if c not in ("config", "repeat", "overrides", "run_id", "verdict"))
_CONFIG_PRINTED = ("config", "status", "runtime_s", "task_fps", "fps", "energy_per_task_j")  # with repeats


NOT_STARTED, KILLED = "NOT STARTED", "KILLED"


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """What a sweep returns (the Python API's rlbench.sweep): its parent run, how it ended, each
    job's summary row (SUMMARY_COLUMNS and what a verdict compares), the verdict over them, and
    the store they are in."""

    parent_run_id: str
    name: str
    status: str  # FINISHED or FAILED (a job failed; the others ran)
    rows: list[dict]
    verdict: Verdict
    tracking_uri: str
    experiment_id: str
    packs: list[dict] = dataclasses.field(default_factory=list)  # per pack: its node figures (sweeps/pack.py)


class SweepFailed(Failure):
    """A sweep some of whose jobs failed (exit 1): the line names them; `result` is the sweep's."""

    def __init__(self, message: str, result: SweepResult):
        super().__init__(message)
        self.result = result

    def __reduce__(self):
        return (type(self), (str(self), self.result))


def finished_by_hash(runs: list[RunRecord]) -> dict[str, RunRecord]:
    """The FINISHED job runs among `runs` (newest first, as the store lists them; a warm-up is
    none) by the config hash (rlbench.tracking.store.config_hash) each did; the newest run of a
    hash wins."""
    return {
        r.tags.get("config_hash") or r.params.get("config_hash"): r for r in reversed(runs) if is_job(r.tags)
    }  # param: runs that record it so


def sweep_key(hashes: list[str], repeats: int) -> str:
    """What a sweep is, whatever its command line says (`resume=true` or not): its jobs' config
    hashes in order and its repeats. A resumed sweep continues the parent with the same key."""
    return hashlib.sha256(json.dumps([hashes, repeats]).encode()).hexdigest()[:16]


def open_parent(
    experiment: Experiment, name: str, jobs: list[list[str]], arguments: list[str], repeats: int = 1, key: str = ""
) -> ParentRun:
    return experiment.open_parent(
        name,
        "sweep",
        {"rlbench.role": "sweep", "sweep_id": uuid.uuid4().hex[:12], SWEEP_KEY: key},
        {"grid": " ".join(arguments)[:6000] or "(none)", "jobs": len(jobs), "repeats": repeats},
    )


def continued_parent(experiment: Experiment, key: str) -> ParentRun | None:
    """With resume=true: the sweep's earlier parent (same key, ended), RUNNING again, or None."""
    parent = experiment.sweep_parent(key)
    if parent is not None:
        parent.reopen()
        print(f"[rlbench sweep] resume: continuing parent run {parent.run_id} ({parent.name})", flush=True)
    return parent


def job_row(index: int, job: list[str], ret, name: str = "", config: str = "", repeat: int = 0) -> dict:
    """One job's summary row; `config` (the configuration it repeats, default its name) and
    `repeat` group the repeats of a configuration (rlbench/core/repeats.py)."""
    row = dict.fromkeys(SUMMARY_COLUMNS)
    row |= {"job": index, "name": name or run_name_from(job), "overrides": " ".join(job), "repeat": repeat}
    row["config"] = config or row["name"]
    if ret is None:
        return row | {"status": NOT_STARTED}
    if ret.status == JobStatus.COMPLETED and isinstance(ret.return_value, dict):
        return (
            row
            | {"status": "FINISHED", "unmeasured": ret.return_value.get("unmeasured") or {}}
            | {k: ret.return_value.get(k) for k in (*_KEPT, "bound")}
        )
    err = failure(ret)
    return row | {"status": "FAILED", "run_id": getattr(err, "run_id", None), "error": f"{type(err).__name__}: {err}"}


def resumed_row(index: int, job: list[str], run: RunRecord, name: str, config: str, repeat: int) -> dict:
    """The row of a job resume=true did not rerun: its earlier FINISHED run, with its numbers."""
    row = job_row(index, job, None, name, config, repeat)
    return (
        row
        | {
            "status": "FINISHED",
            "run_id": run.run_id,
            "resumed": True,
            "unmeasured": unmeasured_of(run.tags),
            "bound": run.tags.get(BOUND_TAG),
            "parent_run": run.tags.get("mlflow.parentRunId"),
        }
        | {k: run.metrics.get(k) for k in _KEPT if k != "run_id"}
    )


def killed_row(row: dict, error: BaseException) -> dict:
    """The row of a job that was running when the sweep was stopped (its run ended KILLED)."""
    return row | {"status": KILLED, "run_id": getattr(error, "run_id", None), "error": type(error).__name__}


def summary_text(rows: list[dict]) -> str:
    def fmt(v):
        return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))

    table = [_PRINTED] + [tuple(fmt(r.get(c)) for c in _PRINTED) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) for line in table]
        + [f"- {c}: {why}" for c, why in missing_reasons(rows).items()]
    )


def config_summary_text(rows: list[dict]) -> str:
    """One line per configuration: its runs' status and, per metric, the median and the spread
    over its finished runs (`72.8 (70.1..75.3, n=3)`)."""

    def fmt(v):
        return "-" if v is None else (v.text() if isinstance(v, Spread) else str(v))

    table = [_CONFIG_PRINTED] + [tuple(fmt(c[k]) for k in _CONFIG_PRINTED) for c in config_rows(rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) for line in table)


def configs_csv(rows: list[dict]) -> str:
    """summary_configs.csv: per configuration its runs and, per metric, median, min, max, n; last
    its verdict (its finished jobs' `verdict`, with_verdicts)."""
    buf = io.StringIO()
    head = (
        ["config", "runs", "finished", "status", "jobs"]
        + [f"{m}{s}" for m in STAT_METRICS for s in ("", "_min", "_max", "_n")]
        + ["verdict"]
    )
    said = {config_key(r): r["verdict"] for r in rows if r.get("verdict")}
    writer = csv.writer(buf)
    writer.writerow(head)
    for c in config_rows(rows):
        cells = [c["config"], c["runs"], c["finished"], c["status"], " ".join(map(str, c["jobs"]))]
        for m in STAT_METRICS:
            v = c[m]
            cells += [rounded(v.median), rounded(v.low), rounded(v.high), v.n] if v is not None else ["", "", "", 0]
        writer.writerow(cells + [said.get(c["config"], "")])
    return buf.getvalue()


def missing_reasons(rows: list[dict]) -> dict[str, str]:
    """Why a printed column of a finished job is empty: the jobs' recorded reasons, each once."""
    out = {}
    for c in _PRINTED:
        empty = [r for r in rows if r.get("status") == "FINISHED" and r.get(c) is None]
        reasons = [explain(c, r.get("unmeasured") or {}) or "not recorded (no reason logged)" for r in empty]
        if reasons:
            out[c] = "; ".join(dict.fromkeys(reasons))
    return out


def rounded_rows(rows: list[dict]) -> list[dict]:
    """The rows' numbers as the jobs logged them (6 significant digits): the verdict judges what
    the store holds, so that the report, reading the store, judges the same numbers."""
    return [{k: rounded(v) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def with_verdicts(rows: list[dict], result: Result) -> list[dict]:
    """Each finished row with its configuration's verdict (the tag's text: Result.label)."""
    return [r | {"verdict": result.label(config_key(r))} if r.get("status") == "FINISHED" else r for r in rows]


def record_summary(parent: ParentRun, rows: list[dict], status: str, result: Result, report: str) -> None:
    """The summary table (summary.csv, summary.json, each job with its verdict; summary_configs.csv
    with repeats), the summary metrics, the verdict's settings, its answer and best configuration
    (tags, which the run page shows unfolded) and the description (rlbench/tracking/parent_note.py,
    naming the command `report`) on the parent, each rendering `result`; rows as rounded_rows gives them."""
    rows, v = with_verdicts(rows, result), result.verdict
    parent.set_tags(
        {METRIC_TAG: v.metric, FLOOR_MIN_TAG: str(v.floor_min), VERDICT_TAG: v.answer()}
        | ({BEST_TAG: v.best} if v.best is not None else {})
    )
    parent.log_table({c: [r.get(c) for r in rows] for c in SUMMARY_COLUMNS}, "summary.json")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(SUMMARY_COLUMNS) + ["error"], extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    parent.log_text(buf.getvalue(), "summary.csv")
    if repeated(rows):
        parent.log_text(configs_csv(rows), "summary_configs.csv")
    parent.log_metrics(summary_metrics(rows, result))
    parent.describe(sweep_note(parent.name, rows, status, parent.experiment_id, parent.run_id, result, report))


def mark_verdicts(experiment: Experiment, parent: str, rows: list[dict], result: Result) -> None:
    """Each finished job of the sweep tagged VERDICT_TAG (parent_note.verdicts), judged over
    all its jobs; a job resume=true took from another sweep (its run is that sweep's child)
    keeps that sweep's. A warning if the tags cannot be written: the jobs' record stands."""
    mine = {r["run_id"] for r in rows if r.get("parent_run") in (None, parent)}
    try:
        experiment.tag_runs({run: {VERDICT_TAG: text} for run, text in verdicts(rows, result).items() if run in mine})
    except Exception as e:  # noqa: BLE001 - the jobs' record stands without it
        log.warning("could not tag the jobs' verdicts: %s", e)


def verdict_settings(confs: list) -> tuple[str, float]:
    """(metric, noise floor minimum) of the sweep's verdict: its jobs' `verdict` settings (one
    per sweep: rlbench/prepare/grid.py refuses a list), the rule's defaults where a config has none."""
    v = getattr(confs[0], "verdict", None) if confs else None
    return (v.metric, v.noise_floor_min) if v is not None else (DEFAULT_METRIC, 0.0)


def report_command(parent_id: str, uri: str) -> str:
    """The command that writes this sweep's report (python -m rlbench.report), naming the store
    unless it is the default one (MLflow exports the process's own as MLFLOW_TRACKING_URI, so
    that variable does not tell what the user's shell holds)."""
    store = "" if uri == TrackingConfig().uri else f" --tracking-uri '{uri}'"
    return f"python -m rlbench.report --sweep {parent_id}{store}"


def ending(rows: list[dict], result: Result, address: str, command: str, packing: list[str] = ()) -> str:
    """The terminal's last lines: the per-configuration table (with repeats), where to look, the
    answer of `result` in words (best; told apart or not, by how much, against the noise floor), the next command."""
    per_config = (
        ["per configuration, median (min..max, n) of its finished runs:\n" + config_summary_text(rows)]
        if repeated(rows)
        else []
    )
    lines = [*per_config, address, *answer_lines(rows, result), *packing, f"Next: {command}"]
    return "\n".join(f"[rlbench sweep] {line}" for line in lines)


def sweep_view(experiment: Experiment, parent: str, jobs: list[list[str]], confs: list, rows: list[dict]) -> str | None:
    """The runs table's shared view of this sweep (None, and a warning, if it cannot be stored),
    with the jobs' verdicts as a column (mark_verdicts); with repeats, grouped by configuration
    (the tag `repeat_group`), its knobs less the repeats'
    seed (each job's last override), which an aggregate row would only average."""
    group = REPEAT_GROUP if repeated(rows) else None
    try:
        knobs = knobs_of([job[:-1] for job in jobs] if group else jobs, param_names(confs[0]))
        return experiment.share_runs_view(parent, knobs, measured_headline(rows), group, (VERDICT_TAG,))
    except Exception as e:  # noqa: BLE001 - the jobs' record stands without it
        log.warning("could not store the runs table's view: %s", e)
        return None


def measured_headline(rows: list[dict]) -> set[str]:
    """The headline metrics some finished job logged (a job's time and rates always are)."""
    done = [r for r in rows if r.get("status") == "FINISHED"]
    return {"runtime_s", "task_fps", "fps"} | {m for m in HEADLINE if any(r.get(m) is not None for r in done)}


def sweep_name(preset: str | None, jobs: list[list[str]], suffix: str = "") -> str:
    """The parent's name: the preset (or 'sweep') and what varies, short enough for the runs
    table (`actor_sweep actors=4..256`, `sweep actors=2,4`), then `suffix` (` repeats=3`)."""
    values: dict[str, list[str]] = {}
    for job in jobs:
        for o in job:
            key, _, value = o.partition("=")
            if not key.startswith(("hydra", "tracking.", "progress")) and value not in values.setdefault(key, []):
                values[key].append(value)
    parts = [f"{k}={','.join(v) if len(v) <= 3 else f'{v[0]}..{v[-1]}'}" for k, v in values.items() if len(v) > 1]
    text = f"{preset or 'sweep'} {' '.join(parts)}".strip()
    room = 48 - len(suffix)
    return (text if len(text) <= room else text[: room - 1] + "…") + suffix


def parent_name(preset: str | None, jobs: list[list[str]], repeats: int) -> str:
    """The parent's name (sweep_name); with repeats, by what varies between configurations,
    not the repeats' seeds (each job's last override)."""
    if repeats > 1:
        return sweep_name(preset, [job[:-1] for job in jobs], f" repeats={repeats}")
    return sweep_name(preset, jobs)


def run_names(jobs: list[list[str]]) -> list[str]:
    """Name each job by what differs between the jobs (e.g. `actors=40 sm_limit=8`)."""
    values: dict[str, set] = {}
    for job in jobs:
        for o in job:
            values.setdefault(o.split("=", 1)[0], set()).add(o)
    varying = {k for k, v in values.items() if len(v) > 1}
    names = [" ".join(o for o in job if o.split("=", 1)[0] in varying) for job in jobs]
    return [n or run_name_from(job) for n, job in zip(names, jobs, strict=True)]


def child_overrides(tracking, parent: str, name: str) -> list[str]:
    """What every job of a sweep gets: its parent, its name, and the parent's store and
    experiment, pinned so that a job on another host (SLURM) reports to the same server
    whatever its environment."""
    return [
        f"tracking.uri='{tracking.uri}'",
        f"tracking.experiment='{tracking.experiment}'",
        f"tracking.parent_run_id={parent}",
        f"tracking.run_name='{name}'",
    ]


def repeat_tags(grid, config_names: list[str], repeat: list[int] | None = None, packed: bool = False):
    """With repeats (or packs), every job's tags `repeat` (0..N-1), `repeats` (N) and `repeat_group`
    (the name of the configuration it repeats), by which the report groups the repeats; `repeat`:
    each job's repeat where packs expanded the grid's jobs (else the grid's)."""
    repeats = grid.repeats if grid is not None else 1
    if repeats == 1 and not packed:
        return {}
    repeat = repeat if repeat is not None else grid.repeat
    return {i: {"repeat": str(k), "repeats": str(repeats), REPEAT_GROUP: config_names[i]} for i, k in enumerate(repeat)}


def tag_overrides(tags: dict[str, str]) -> list[str]:
    """The overrides that set a job's repeat tags (repeat_tags) on its config."""
    return [f"++tracking.tags.{k}={_quoted(v) if k == REPEAT_GROUP else v}" for k, v in tags.items()]


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def child_config(config, tracking, parent: str, name: str, tags: dict[str, str]):
    """A job's validated config as its child_overrides and tag_overrides make it: the
    sweep's store and experiment, its parent, its name and its repeat tags (tests/test_sweep_logic.py
    pins it equal to the composed and validated whole line)."""
    pinned = dataclasses.replace(
        config.tracking,
        uri=tracking.uri,
        experiment=tracking.experiment,
        parent_run_id=parent,
        run_name=name,
        tags={**config.tracking.tags, **tags},
    )
    return dataclasses.replace(config, tracking=pinned)


def launch(
    launcher,
    todo: list[tuple[int, list[str]]],
    parent: str,
    names: list[str],
    tracking,
    configs: list,
    repeat_tags: dict[int, dict[str, str]] | None = None,
    started=lambda i: None,
    together: list[list[int]] = (),
    pack_launch=None,
):
    """Yield (index, job, JobReturn), each job launched by Hydra's launcher with its config as
    the sweep validated it (handed to the job in this process: rlbench/prepare/job.py). The basic
    launcher gets one job at a time (progress between jobs); others (joblib, submitit) get all
    jobs at once and run them in parallel, each validating its own in its process.
    repeat_tags: per job index its repeat tags; started(index): told as each job starts;
    together: the packs' jobs, each pack launched at once by pack_launch(K) (rlbench/sweeps/pack.py)."""
    total, repeat_tags = len(names), repeat_tags or {}
    tagged = [
        (i, job, job + child_overrides(tracking, parent, names[i]) + tag_overrides(repeat_tags.get(i, {})))
        for i, job in todo
    ]
    handed = {
        tuple(o): child_config(configs[i], tracking, parent, names[i], repeat_tags.get(i, {})) for i, _, o in tagged
    }
    if in_process(launcher):
        for n, group in enumerate(_groups(tagged, together)):
            (i, job, overrides) = group[0]
            shown = " ".join(o for o in job if not o.startswith("++packing.")) or "(defaults)"
            cpus = " | ".join(
                o.split("=", 1)[1].strip("'") for _, j, _ in group for o in j if o.startswith("++packing.cpus=")
            )
            print(
                f"[rlbench sweep] job {n + 1} (#{i} of {total}): {shown}"
                + (
                    f", and {len(group) - 1} more at once: a pack of {len(group)} on CPUs {cpus}"
                    if len(group) > 1
                    else ""
                ),
                flush=True,
            )
            for i, _, _ in group:
                started(i)
            if len(group) > 1:  # in K processes of their own, each validating its own config
                rets = pack_launch(len(group)).launch([o for _, _, o in group], initial_job_idx=group[0][0])
                yield from ((i, job, ret) for (i, job, _), ret in zip(group, rets, strict=True))
                continue
            with handing(handed):
                ret = launcher.launch([overrides], initial_job_idx=i)[0]
            yield i, job, ret
        return
    print(f"[rlbench sweep] launching {len(tagged)} jobs with {type(launcher).__name__}", flush=True)
    for i, _, _ in tagged:
        started(i)
    rets = launcher.launch([o for _, _, o in tagged], initial_job_idx=0)  # in other processes: each validates its own
    yield from ((i, job, ret) for (i, job, _), ret in zip(tagged, rets, strict=True))


def _groups(tagged: list[tuple], together: list[list[int]]) -> list[list[tuple]]:
    """The jobs to launch in order, a pack's (those of its jobs still to run) as one group."""
    pack_of = {i: k for k, members in enumerate(together) for i in members}
    groups: list[list[tuple]] = []
    for item in tagged:
        k = pack_of.get(item[0])
        if k is not None and groups and pack_of.get(groups[-1][0][0]) == k:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def before_first_job(launcher, options, tracking, parent: str, first: list[str], config, folder: int) -> None:
    """The sweep's options before its first job (rlbench/sweeps/warm.py): the GPU's idle power,
    then the warm-up job (the first job's configuration under the parent, named and tagged as
    one; its Hydra folder number `folder`, after the last job's, so that none is overwritten)."""
    if options.idle_power_s > 0:
        measure_idle(tracking, parent, options.idle_power_s)
    if options.warmup:
        overrides = first + child_overrides(tracking, parent, WARMUP_NAME) + tag_overrides(warm_tags())
        warm_up(launcher, overrides, child_config(config, tracking, parent, WARMUP_NAME, warm_tags()), folder)


def sweep_tracking(confs: list):
    """The tracking settings of the whole sweep: one experiment for all its jobs. When the jobs'
    own experiments differ (one per env by default, and the sweep spans envs), they all go into
    one named after those experiments ('rlbench-breakout+pong')."""
    names = sorted({c.tracking.experiment for c in confs})
    if len(names) == 1:
        return confs[0].tracking
    prefix = os.path.commonprefix(names)
    prefix = prefix[: prefix.rfind("-") + 1] if "-" in prefix else ""
    return dataclasses.replace(confs[0].tracking, experiment=prefix + "+".join(n[len(prefix) :] for n in names))


def run_grid(sweeper, arguments: list[str], jobs: list[list[str]], confs: list, grid=None, store=Experiment):
    """Steps 2-5 for the jobs of the grid and their validated configs (rlbench.prepare.grid);
    grid: its Grid, which says which configuration each job repeats (None: one run each);
    store: opens the tracking port on the sweep's TrackingConfig."""
    tracking = sweep_tracking(confs)
    check(tracking.uri)  # PreflightError: a refusal, exit 2 before any run
    options = getattr(confs[0], "sweep", None)
    if options is not None and (problem := options_problem(options, sweeper.launcher)):
        raise Refusal(f"{problem}; no job started")
    experiment = store(tracking)
    if experiment.unwritable:
        raise Refusal(f"{experiment.unwritable}; no job started")
    experiment.mark_stale_runs()
    repeats = grid.repeats if grid is not None else 1
    grid_jobs, names = jobs, run_names(jobs)
    configs = run_names([job[:-1] for job in jobs]) if repeats > 1 else names  # less the repeats' seed
    repeat = grid.repeat if grid is not None else [0] * len(jobs)
    packs = []
    if any(getattr(c, "pack", 1) > 1 for c in confs):  # each pack's K jobs in place of its configuration's one
        if not in_process(sweeper.launcher):
            raise Refusal(
                f"pack with {type(sweeper.launcher).__name__}: allowed with the basic launcher only "
                "(the sweep launches each pack's jobs together itself); no job started"
            )
        jobs, confs, names, configs, repeat, packs = expand(jobs, confs, names, configs, repeat, usable_cpus())
    hashes = [config_hash(conf) for conf in confs]
    done = finished_by_hash(experiment.finished_runs()) if confs[0].resume else {}
    parent = continued_parent(experiment, sweep_key(hashes, repeats)) if confs[0].resume else None
    if parent is None:
        name = experiment.unique_name(
            parent_name(sweeper.config.hydra.runtime.choices.get("experiment"), grid_jobs, repeats)
        )
        parent = open_parent(experiment, name, jobs, arguments, repeats, sweep_key(hashes, repeats))
    rows = {
        i: (
            resumed_row(i, job, done[hashes[i]], names[i], configs[i], repeat[i])
            if hashes[i] in done
            else job_row(i, job, None, names[i], configs[i], repeat[i])
        )
        for i, job in enumerate(jobs)
    }
    todo = [(i, job) for i, job in enumerate(jobs) if hashes[i] not in done]
    if len(todo) < len(jobs):
        print(
            f"[rlbench sweep] resume: {len(jobs) - len(todo)} of {len(jobs)} jobs already FINISHED, not rerun",
            flush=True,
        )

    def run() -> str:
        started: list[int] = []
        try:
            if todo and options is not None:
                (i, first), folder = todo[0], len(jobs)
                before_first_job(sweeper.launcher, options, tracking, parent.run_id, first, confs[i], folder)
            for i, job, ret in launch(
                sweeper.launcher,
                todo,
                parent.run_id,
                names,
                tracking,
                confs,
                repeat_tags(grid, configs, repeat, bool(packs)),
                started.append,
                together=[p.members for p in packs if p.k > 1],
                pack_launch=lambda k: pack_launcher(sweeper, k),
            ):
                rows[i] = job_row(i, job, ret, names[i], configs[i], repeat[i])
                if rows[i]["status"] == "FAILED":
                    log.error("job %d [%s] failed: %s", i, rows[i]["overrides"], rows[i]["error"])
        except KeyboardInterrupt as e:
            for i in started:
                if rows[i]["status"] == NOT_STARTED:
                    rows[i] = killed_row(rows[i], e)
            raise
        return "FAILED" if any(r["status"] == "FAILED" for r in rows.values()) else "FINISHED"

    judged: dict = {}  # what close() judged: the result's rows and verdict

    def close(status: str) -> None:
        ordered = rounded_rows([rows[i] for i in sorted(rows)])
        v = rows_result(ordered, *verdict_settings(confs))  # the sweep's Result, judged once; rendered below
        judged.update(rows=with_verdicts(ordered, v), verdict=v.verdict, packs=[])
        packing = []
        if any(p.k > 1 for p in packs):  # the packs' node figures and their verdicts (sweeps/pack.py)
            judged["packs"], packing = close_packs(parent, tracking, packs, ordered, confs[0])
        record_summary(parent, ordered, status, v, report_command(parent.run_id, tracking.uri))
        mark_verdicts(experiment, parent.run_id, ordered, v)
        view = sweep_view(experiment, parent.run_id, jobs, confs, ordered)
        print(
            f"[rlbench sweep] parent run {parent.run_id} ({parent.name}) {status}\n{summary_text(ordered)}", flush=True
        )
        print(
            ending(
                ordered,
                v,
                ui_hint(tracking.uri, experiment.id, view, tracking.ui_port),
                report_command(parent.run_id, tracking.uri),
                packing,
            ),
            flush=True,
        )

    status = live(parent, run, close, "sweep parent")
    result = SweepResult(
        parent.run_id,
        parent.name,
        status,
        judged["rows"],
        judged["verdict"],
        tracking.uri,
        experiment.id,
        judged["packs"],
    )
    if status == "FAILED":
        failed = [r["overrides"] for r in result.rows if r["status"] == "FAILED"]
        raise SweepFailed(f"{len(failed)} of {len(jobs)} jobs failed: {'; '.join(failed)}", result)
    return result
