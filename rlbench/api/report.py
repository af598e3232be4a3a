"""`rlbench.make_report(sweep=...)`: a sweep's, a search's or an experiment's report read from
MLflow in the calling process (the figures, report.html, findings.json), logged under `report/`
on its parent run; the Report returned. `python -m rlbench.report` is this call's command.
docs/metrics.md, "Report artifacts".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rlbench.core.errors import Refusal
from rlbench.prepare.preflight import check
from rlbench.report.build import build_report
from rlbench.tracking.parent_note import with_report
from rlbench.tracking.readers import NoSuchRun, experiment_id
from rlbench.tracking.readers import study_parent as find
from rlbench.tracking.store import store_uri, use_store
from rlbench.tracking.study_records import Study, load_experiment, load_parent

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"


@dataclasses.dataclass(frozen=True)
class Report:
    """A written report: what it covers, its files, the verdict's lines and the findings."""

    title: str
    finished: int  # jobs that finished
    jobs: int  # jobs in all (finished, failed and missing)
    html: Path
    figures: dict[str, Path]
    not_drawn: dict[str, str]  # figure -> why it was not drawn
    lines: list[str]  # the verdict's sentences
    findings: dict
    logged_on: str | None  # the run the report is logged on (None: not logged)


def load(sweep: str | None = None, study: str | None = None, experiment: str | None = None) -> Study:
    """The study to report on, from the current store: a sweep's or search's parent run, an
    Optuna study's parent (by name) or an experiment's job runs. LookupError with the reason."""
    if experiment:
        return load_experiment(experiment)
    if sweep is None:
        found = find(study)
        if found is None:
            raise LookupError(f"--study {study!r}: no search parent run with that study at {store_uri()}")
        sweep = found.run_id
    try:
        loaded = load_parent(sweep)
    except NoSuchRun as e:
        raise LookupError(f"--sweep {sweep}: no such run at {e.uri} ({e.detail[:200]})") from e
    if not loaded.jobs and not loaded.missing:
        raise LookupError(
            f"--sweep {sweep}: run '{loaded.title}' has no child runs; give a sweep's or a search's "
            "parent run id (the sweep prints it: '[rlbench sweep] parent run <id>')"
        )
    return loaded


def log_report(study: Study, out: Path, verdict: list[str]) -> str:
    """Artifacts under `report/` on the parent, and the parent's description updated with the
    verdict and the report's link; an experiment gets a run of its own (role report)."""
    from rlbench.tracking.parent import open_parent, parent_run  # lazy: keeps mlflow, torch off the start

    if study.parent_id is None:
        run = open_parent(
            experiment_id(study.title.removeprefix("experiment ")),
            f"report {study.title}",
            "report",
            {"rlbench.role": "report"},
        )
        run.end("FINISHED")
    else:
        run = parent_run(study.parent_id)
    run.log_folder(out, "report")
    run.describe(with_report(run.description(), verdict, run.experiment_id, run.run_id))
    return run.run_id


def make_report(
    sweep: str | None = None,
    *,
    study: str | None = None,
    experiment: str | None = None,
    tracking_uri: str = DEFAULT_URI,
    out: Path | str | None = None,
    knee_share: float = 0.10,
    tolerance: float = 0.05,
    log: bool = True,
) -> Report:
    """The report of one of `sweep` (a parent run id), `study` (an Optuna study's name) or
    `experiment` (every job run of it), from `tracking_uri`, written under `out` (default
    reports/<id>) and, with `log`, logged on its parent. Refusal where there is nothing to read."""
    if sum(x is not None for x in (sweep, study, experiment)) != 1:
        raise Refusal(f"sweep={sweep!r}, study={study!r}, experiment={experiment!r}: allowed: exactly one of them")
    check(tracking_uri, key="--tracking-uri", reading=True)  # a store that cannot be used: a refusal, now
    use_store(tracking_uri)
    try:
        loaded = load(sweep, study, experiment)
    except LookupError as e:  # no such run or study: a refusal
        raise Refusal(str(e)) from e
    folder = Path(out) if out is not None else Path("reports") / (loaded.parent_id or experiment)
    built = build_report(loaded, folder, knee_share, tolerance)
    return Report(
        loaded.title,
        len(loaded.finished),
        len(loaded.jobs) + len(loaded.missing),
        built["html"],
        built["figures"],
        built["not_drawn"],
        built["lines"],
        built["findings"],
        log_report(loaded, folder, built["lines"]) if log else None,
    )
