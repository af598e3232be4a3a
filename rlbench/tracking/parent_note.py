"""What a sweep's parent run shows, the place a user starts: summary metrics and a description.

`summary_metrics(rows)` (`best/<metric>`, `jobs_finished`, `jobs_failed`), `sweep_note(...)`
(the description in markdown, its links relative to the MLflow UI) and `with_report` (its
report section filled); tracking/parent.py writes them. docs/metrics.md, "Sweep parent run".
"""

from __future__ import annotations

import math

from rlbench.core.repeats import SINGLE_RUN, best_config, config_key, config_rows, pair_spread, repeated, rivals
from rlbench.tracking.views import VIEW, runs_view_key, view_link

REPORT_MARK = "#### Report"
SUMMARY_METRICS = ("runtime_s", "fps", "energy_per_task_j", "cpu_gpu_ratio")


def _number(v) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def best_row(rows: list[dict]) -> dict | None:
    """The finished configuration with the shortest task by its median runtime_s (None when no
    job finished with a runtime): with one run per configuration, that job's row; with repeats
    (rlbench/core/repeats.py) a row of the configuration's medians, with `runs`, `jobs` and per
    metric its `spread` (a Spread), and `rivals`: the configurations it cannot be told apart from."""
    configs = config_rows(rows, SUMMARY_METRICS)
    best = best_config(configs)
    if best is None:
        return None
    if best["runs"] == 1:
        return next(r for r in rows if config_key(r) == best["config"]) | {"rivals": rivals(configs, best)}
    return ({"job": best["jobs"][0], "name": best["config"], "config": best["config"], "status": "FINISHED",
             "runs": best["runs"], "finished": best["finished"], "jobs": best["jobs"],
             "spread": {m: best[m] for m in SUMMARY_METRICS}, "rivals": rivals(configs, best)}
            | {m: best[m].median if best[m] is not None else None for m in SUMMARY_METRICS})


def verdicts(rows: list[dict]) -> dict[str, str]:
    """The tag VERDICT_TAG (tracking/views.py) of each finished job with a run, by run id, as
    best_row judges by the median runtime_s: `best`; `not told apart from best (difference 0.3 s
    < spread 0.5 s)`; `slower than best: +2.0 s > spread 0.5 s`; where the spread is unknown
    (single runs) `+2.0 s vs best (spread unknown)` and the best `best (spread unknown)`."""
    configs = config_rows(rows, ("runtime_s",))
    best = best_config(configs)
    if best is None:
        return {}
    tied = dict(rivals(configs, best))
    by_config = {c["config"]: c for c in configs}
    return {r["run_id"]: _verdict(by_config[config_key(r)], best, configs, tied) for r in rows
            if r.get("status") == "FINISHED" and r.get("run_id")}


def _verdict(c: dict, best: dict, configs: list[dict], tied: dict[str, str]) -> str:
    """One configuration's verdict against the best (verdicts)."""
    if c is best:
        unknown = any(pair_spread(best["runtime_s"], o["runtime_s"]) is None for o in configs
                      if o is not best and o["runtime_s"] is not None)
        return "best (spread unknown)" if unknown else "best"
    if c["config"] in tied:
        return f"not told apart from best ({tied[c['config']].removeprefix('cannot tell apart: ')})"
    if c["runtime_s"] is None:
        return "no runtime_s recorded"
    diff, width = c["runtime_s"].median - best["runtime_s"].median, pair_spread(best["runtime_s"], c["runtime_s"])
    if width is None:
        return f"+{diff:.1f} s vs best (spread unknown)"
    return f"slower than best: +{diff:.1f} s > spread {width:.1f} s"


def summary_metrics(rows: list[dict]) -> dict[str, float]:
    """The parent's metrics: `best/<m>` of the best configuration, the counts of finished and
    failed jobs; unknown values are left out. (Per-job values are the description's table and
    the runs table's view: a metric per job plotted against the job's index read as a series
    of the sweep.)"""
    best = best_row(rows)
    out = {f"best/{m}": _number(best.get(m)) for m in SUMMARY_METRICS} if best is not None else {}
    out |= {"jobs_finished": sum(r.get("status") == "FINISHED" for r in rows),
            "jobs_failed": sum(r.get("status") == "FAILED" for r in rows)}
    return {k: float(v) for k, v in out.items() if v is not None}


def artifact_link(experiment_id: str, run_id: str, path: str) -> str:
    return f"#/experiments/{experiment_id}/runs/{run_id}/artifactPath/{path}?{VIEW}"


def _fmt(v) -> str:
    n = _number(v)
    return "not measured" if n is None else f"{n:.4g}"


TABLE_METRICS = ("runtime_s", "task_fps", "fps", "energy_per_task_j")


def run_link(experiment_id: str, run_id: str) -> str:
    return f"#/experiments/{experiment_id}/runs/{run_id}?{VIEW}"


def links_line(experiment_id: str, parent_id: str, report: bool) -> str:
    """The description's first links: the jobs' table and charts (rlbench/tracking/views.py),
    the report (or how to make it), summary.csv."""
    key = runs_view_key(parent_id)
    made = (f"[Report]({artifact_link(experiment_id, parent_id, 'report/report.html')})" if report
            else f"report: `python -m rlbench.report --sweep {parent_id}`")
    return (f"[Jobs table]({view_link(experiment_id, key)}) · [Charts]({view_link(experiment_id, key, chart=True)})"
            f" · {made} · [summary.csv]({artifact_link(experiment_id, parent_id, 'summary.csv')})")


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


def jobs_table(rows: list[dict], experiment_id: str, labels: list[str] | None = None) -> list[str]:
    """Markdown: a row per job (with repeats: per configuration, medians with their range),
    each linked to its run page in the Model training view; headline numbers and the bound;
    cells unwrapped and padded (table_row).
    labels: metric names as shown (a search's "energy_per_task_j (estimate)"), by their name."""
    shown = {label.split(" ")[0]: label for label in labels or []}
    head = [table_row(["job", *(shown.get(m, m) for m in TABLE_METRICS), "bound"]),
            "|---" * (len(TABLE_METRICS) + 2) + "|"]
    if repeated(rows):
        out = []
        for c in config_rows(rows, TABLE_METRICS):
            runs = [r for r in rows if config_key(r) == c["config"] and r.get("run_id")]
            name = f"`{c['config']}` " + " ".join(f"[{i + 1}]({run_link(experiment_id, r['run_id'])})"
                                                  for i, r in enumerate(runs))
            bounds = sorted({r.get("bound") for r in runs if r.get("bound")})
            out.append(table_row([name, *(_cell(c, m) for m in TABLE_METRICS), "; ".join(bounds)]))
        return head + out
    out = []
    for r in rows:
        name = r.get("name") or r.get("overrides") or "(defaults)"
        name = f"[{name}]({run_link(experiment_id, r['run_id'])})" if r.get("run_id") else name
        out.append(table_row([name, *(_cell(r, m) for m in TABLE_METRICS), r.get("bound") or ""]))
    return head + out


def _best_lines(rows: list[dict], code=lambda s: f"`{s}`") -> list[str]:
    """The best configuration and those not told apart from it; `code` marks a name (markdown
    for the description, plain for the terminal: answer_lines)."""
    best = best_row(rows)
    if best is None:
        return []
    if "runs" in best:
        lines = [f"Best (shortest median task): {code(best['name'])} ({best['finished']} of {best['runs']} runs "
                 f"finished): " + ", ".join(f"{m} {best['spread'][m].text() if best['spread'][m] else _fmt(None)}"
                                            for m in SUMMARY_METRICS)]
    else:
        name = best.get('name') or best.get('overrides') or '(defaults)'
        lines = [f"Best (shortest task): job {best['job']} {code(name)}"]
    if best["rivals"]:
        lines += ["", "Not told apart from it: " + "; ".join(f"{code(n)} ({why})" for n, why in best["rivals"])]
    elif not repeated(rows) and sum(r.get("status") == "FINISHED" for r in rows) > 1:
        lines[-1] += f" ({SINGLE_RUN})"
    return lines


def answer_lines(rows: list[dict]) -> list[str]:
    """What a sweep's terminal ends with, before the UI's address: the best configuration and
    those not told apart from it, in plain text."""
    return [line for line in _best_lines(rows, code=str) if line]


def sweep_note(name: str, rows: list[dict], status: str, experiment_id: str, parent_id: str) -> str:
    """The sweep's description: its links and the jobs' table first (above MLflow's fold), then
    the best configuration and the report's section; its grid is the param `grid`."""
    states = ("FINISHED", "FAILED", "KILLED", "NOT STARTED")
    counts = {s: sum(r.get("status", "").startswith(s) for r in rows) for s in states}
    lines = [f"**rlbench sweep** {name} · {status} · {len(rows)} jobs: "
             + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n),
             "", links_line(experiment_id, parent_id, report=False), "", *jobs_table(rows, experiment_id)]
    best = _best_lines(rows)
    lines += ["", *best] if best else []
    lines += ["", REPORT_MARK, "", f"Not made yet: `python -m rlbench.report --sweep {parent_id}`"]
    return "\n".join(lines)


def with_report(note: str | None, verdict: list[str], experiment_id: str, parent_id: str) -> str:
    """The note with its report section replaced by the verdict and the report's link (also in
    its first links)."""
    head = (note or "").split(REPORT_MARK, 1)[0].rstrip()
    head = head.replace(links_line(experiment_id, parent_id, False), links_line(experiment_id, parent_id, True))
    section = [REPORT_MARK, "", (f"[Report]({artifact_link(experiment_id, parent_id, 'report/report.html')})"
               f" · [findings.json]({artifact_link(experiment_id, parent_id, 'report/findings.json')})"), ""]
    section += [f"- {line}" for line in verdict] or ["- (no verdict: no finished job to judge)"]
    return "\n".join(([head, ""] if head else []) + section)

