"""What a sweep's parent run shows, the place a user starts: `summary_metrics` (`best/<metric>`,
`jobs_finished`, `jobs_failed`), `sweep_note` (the description in markdown, its links relative
to the MLflow UI), `verdicts` (the jobs' tags) and `with_report`; tracking/parent.py writes them.
Each renders the sweep's one Result (core/verdict.py). docs/metrics.md, "Sweep parent run".
"""

from __future__ import annotations

import math

from rlbench.core.repeats import config_key, config_rows, repeated
from rlbench.core.verdict import Result
from rlbench.tracking.views import VIEW, runs_view_key, view_link

REPORT_MARK = "#### Report"
SUMMARY_METRICS = ("runtime_s", "fps", "energy_per_task_j", "cpu_gpu_ratio")


def _number(v) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def best_row(rows: list[dict], r: Result) -> dict | None:
    """The best configuration of the Result `r` (None when no job finished with the compared
    metric): with one run per configuration, that job's row; with repeats a row of the
    configuration's medians, with `runs`, `jobs` and per metric its `spread` (a Spread); both
    with `verdict`, the Verdict."""
    v = r.verdict
    if v.best is None:
        return None
    best = next(c for c in config_rows(rows, SUMMARY_METRICS) if c["config"] == v.best)
    if best["runs"] == 1:
        return next(r for r in rows if config_key(r) == best["config"]) | {"verdict": v}
    return {
        "job": best["jobs"][0],
        "name": best["config"],
        "config": best["config"],
        "status": "FINISHED",
        "runs": best["runs"],
        "finished": best["finished"],
        "jobs": best["jobs"],
        "spread": {m: best[m] for m in SUMMARY_METRICS},
        "verdict": v,
    } | {m: best[m].median if best[m] is not None else None for m in SUMMARY_METRICS}


def verdicts(rows: list[dict], r: Result) -> dict[str, str]:
    """The tag VERDICT_TAG (tracking/views.py) of each finished job with a run, by run id: its
    configuration's label by the verdict rule (`best; noise floor 7.4%`, `not told apart from
    best: 1.9% slower; noise floor 7.4%`, `slower than best: 77.5% slower; noise floor 7.4%`;
    single runs: `57.6% slower than best; noise floor unknown: ...`; from 2x a ratio, `2.56x
    slower`: verdict.how_much), as `r` labels it."""
    out = {
        row["run_id"]: r.label(config_key(row)) for row in rows if row.get("status") == "FINISHED" and row.get("run_id")
    }
    return {run: text for run, text in out.items() if text is not None}


def summary_metrics(rows: list[dict], r: Result) -> dict[str, float]:
    """The parent's metrics: `best/<m>` of the best configuration, the counts of finished and
    failed jobs; unknown values are left out. (Per-job values are the description's table and
    the runs table's view: a metric per job plotted against the job's index read as a series
    of the sweep.)"""
    best = best_row(rows, r)
    out = {f"best/{m}": _number(best.get(m)) for m in SUMMARY_METRICS} if best is not None else {}
    out |= {
        "jobs_finished": sum(r.get("status") == "FINISHED" for r in rows),
        "jobs_failed": sum(r.get("status") == "FAILED" for r in rows),
    }
    return {k: float(v) for k, v in out.items() if v is not None}


def artifact_link(experiment_id: str, run_id: str, path: str) -> str:
    return f"#/experiments/{experiment_id}/runs/{run_id}/artifactPath/{path}?{VIEW}"


def _fmt(v) -> str:
    n = _number(v)
    return "not measured" if n is None else f"{n:.4g}"


TABLE_METRICS = ("runtime_s", "task_fps", "fps", "energy_per_task_j")


def run_link(experiment_id: str, run_id: str) -> str:
    return f"#/experiments/{experiment_id}/runs/{run_id}?{VIEW}"


NOT_MADE = "report: not made yet (its command is below)"


def report_link(experiment_id: str, parent_id: str) -> str:
    return f"[Report]({artifact_link(experiment_id, parent_id, 'report/report.html')})"


def links_line(experiment_id: str, parent_id: str) -> str:
    """The description's links: the jobs' table and charts (rlbench/tracking/views.py), where
    the report's command is (NOT_MADE, which with_report replaces by the report's link), summary.csv."""
    key = runs_view_key(parent_id)
    return (
        f"[Jobs table]({view_link(experiment_id, key)}) · [Charts]({view_link(experiment_id, key, chart=True)})"
        f" · {NOT_MADE} · [summary.csv]({artifact_link(experiment_id, parent_id, 'summary.csv')})"
    )


def _cell(row: dict, metric: str) -> str:
    v = row.get(metric)
    if hasattr(v, "text"):  # a Spread: median (min..max, n)
        return v.text()
    return "failed" if row.get("status") == "FAILED" else _fmt(v)


PAD = "&nbsp;&nbsp;"  # a cell's margin: MLflow's description draws a table without any (its sanitizer drops style)


def table_row(cells: list[str]) -> str:
    """A markdown table row as MLflow's description draws it readably: each cell kept on one line
    (its spaces non-breaking, U+00A0) between two non-breaking spaces of margin each side (as
    entities: the table parser trims whitespace characters at a cell's edges)."""
    return "| " + " | ".join(f"{PAD}{c.replace(' ', chr(0xA0))}{PAD}" for c in cells) + " |"


def jobs_table(
    rows: list[dict], experiment_id: str, labels: list[str] | None = None, metrics: tuple[str, ...] = TABLE_METRICS
) -> list[str]:
    """Markdown: a row per job (with repeats: per configuration, medians with their range),
    each linked to its run page in the Model training view; headline numbers and the bound;
    cells unwrapped and padded (table_row).
    labels: metric names as shown (a search's "energy_per_task_j (estimate)"), by their name;
    metrics: the columns (a search's adds cpu_gpu_ratio)."""
    shown = {label.split(" ")[0]: label for label in labels or []}
    head = [table_row(["job", *(shown.get(m, m) for m in metrics), "bound"]), "|---" * (len(metrics) + 2) + "|"]
    if repeated(rows):
        out = []
        for c in config_rows(rows, metrics):
            runs = [r for r in rows if config_key(r) == c["config"] and r.get("run_id")]
            name = f"`{c['config']}` " + " ".join(
                f"[{i + 1}]({run_link(experiment_id, r['run_id'])})" for i, r in enumerate(runs)
            )
            bounds = sorted({r.get("bound") for r in runs if r.get("bound")})
            out.append(table_row([name, *(_cell(c, m) for m in metrics), "; ".join(bounds)]))
        return head + out
    out = []
    for r in rows:
        name = r.get("name") or r.get("overrides") or "(defaults)"
        name = f"[{name}]({run_link(experiment_id, r['run_id'])})" if r.get("run_id") else name
        out.append(table_row([name, *(_cell(r, m) for m in metrics), r.get("bound") or ""]))
    return head + out


def _best_lines(rows: list[dict], r: Result, code=lambda s: f"`{s}`") -> list[str]:
    """The best configuration, the verdict's answer and each comparison, of the Result `r`;
    `code` marks a name (markdown for the description, plain for the terminal: answer_lines)."""
    v, best = r.verdict, best_row(rows, r)
    if best is None:
        return [f"Verdict: {v.answer()}"] if rows else []  # why there is none
    if "runs" in best:
        lines = [
            f"Best (median {v.metric}): {code(best['name'])} ({best['finished']} of {best['runs']} runs "
            f"finished): "
            + ", ".join(f"{m} {best['spread'][m].text() if best['spread'][m] else _fmt(None)}" for m in SUMMARY_METRICS)
        ]
    else:
        name = best.get("name") or best.get("overrides") or "(defaults)"
        lines = [f"Best ({v.metric}): job {best['job']} {code(name)}"]
    return lines + [f"Verdict: {v.answer()}"] + [f"- {c.text}" for c in v.comparisons]


def answer_lines(rows: list[dict], r: Result) -> list[str]:
    """The best configuration, the verdict's answer and its comparisons, in plain text (what a
    sweep's terminal ends with)."""
    return _best_lines(rows, r, code=str)


def title(name: str) -> str:
    """The description's first words: `rlbench sweep` and the parent's name less its own
    `sweep ` (a sweep without a preset is named `sweep actors=2,4`: rlbench/sweeps/sweep.py sweep_name)."""
    return f"**rlbench sweep** {name.removeprefix('sweep ')}"


def sweep_note(
    name: str, rows: list[dict], status: str, experiment_id: str, parent_id: str, r: Result, report: str
) -> str:
    """The sweep's description. MLflow 3.17 folds a description taller than 150 px and lays a fade
    over its lower 90 px, which takes the clicks: so its first line is what ran and the links, its
    second the verdict (its best), then the best configuration's figures, the jobs' table and the
    comparisons, and the report's section with its command `report`; its grid is the param `grid`."""
    states = ("FINISHED", "FAILED", "KILLED", "NOT STARTED")
    counts = {s: sum(r.get("status", "").startswith(s) for r in rows) for s in states}
    best = _best_lines(rows, r)
    verdict = [line for line in best if line.startswith("Verdict: ")]
    done = ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n)
    lines = [
        f"{title(name)} · {status} · {len(rows)} jobs: {done} · {links_line(experiment_id, parent_id)}",
        *(x for line in verdict for x in ("", f"**{line}**")),
        *(x for line in best if not line.startswith(("Verdict: ", "- ")) for x in ("", line)),
        "",
        *jobs_table(rows, experiment_id),
    ]
    comparisons = [line for line in best if line.startswith("- ")]
    lines += ["", *comparisons] if comparisons else []
    lines += ["", REPORT_MARK, "", f"Not made yet: `{report}`"]
    return "\n".join(lines)


def with_report(note: str | None, verdict: list[str], experiment_id: str, parent_id: str) -> str:
    """The note with its report section replaced by the verdict and the report's link (also in
    its first line)."""
    head = (note or "").split(REPORT_MARK, 1)[0].rstrip()
    head = head.replace(NOT_MADE, report_link(experiment_id, parent_id), 1)
    section = [
        REPORT_MARK,
        "",
        (
            f"{report_link(experiment_id, parent_id)}"
            f" · [findings.json]({artifact_link(experiment_id, parent_id, 'report/findings.json')})"
        ),
        "",
    ]
    section += [f"- {line}" for line in verdict] or ["- (no verdict: no finished job to judge)"]
    return "\n".join(([head, ""] if head else []) + section)
