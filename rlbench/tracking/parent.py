"""A sweep's parent run as the place a user starts: summary metrics, a description, its source.

- `summary_metrics(rows)`: per job `jobs/<metric>` (step = the job's index in the grid, so the
  parent's charts plot each metric across the sweep) and `best/<metric>` of the best job (the
  shortest task among the finished jobs: the study's "finishes fastest"), `jobs_finished`,
  `jobs_failed`;
- `sweep_note(...)`: the parent's description (MLflow's note, markdown): what ran, the best
  job, a link to compare the jobs, and a report section that `python -m rlbench.report`
  replaces with its verdict and a link to report/report.html (`with_report`);
- `source_tags()`: who started it and from what (MLflow's user and source tags).

Links are relative to the MLflow UI (`#/...`), so they work on whatever host serves it.
"""

from __future__ import annotations

import getpass
import json
import math
import sys
import urllib.parse

from rlbench.repeats import SINGLE_RUN, best_config, config_key, config_rows, repeated, rivals

NOTE_TAG = "mlflow.note.content"
REPORT_MARK = "#### Report"
SUMMARY_METRICS = ("runtime_s", "fps", "energy_per_task_j", "cpu_gpu_ratio")


def _number(v) -> float | None:
    return float(v) if isinstance(v, int | float) and math.isfinite(v) else None


def best_row(rows: list[dict]) -> dict | None:
    """The finished configuration with the shortest task by its median runtime_s (None when no
    job finished with a runtime): with one run per configuration, that job's row; with repeats
    (rlbench/repeats.py) a row of the configuration's medians, with `runs`, `jobs` and per
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


def summary_metrics(rows: list[dict]) -> list[tuple[str, float, int]]:
    """(name, value, step) triples for the parent (see module doc); unknown values are left out."""
    out = [(f"jobs/{m}", _number(r.get(m)), int(r["job"])) for r in rows for m in SUMMARY_METRICS]
    best = best_row(rows)
    if best is not None:
        out += [(f"best/{m}", _number(best.get(m)), 0) for m in SUMMARY_METRICS]
    out += [("jobs_finished", sum(r.get("status") == "FINISHED" for r in rows), 0),
            ("jobs_failed", sum(r.get("status") == "FAILED" for r in rows), 0)]
    return [(k, float(v), s) for k, v, s in out if v is not None]


_VIEW = "workflowType=machine_learning"  # MLflow 3's "Model training" view, not its GenAI one


def compare_link(experiment_id: str, run_ids: list[str]) -> str:
    """The UI's compare view of these runs."""
    runs = urllib.parse.quote(json.dumps(sorted(run_ids)))
    return f"#/compare-runs?runs={runs}&experiments={urllib.parse.quote(json.dumps([experiment_id]))}&{_VIEW}"


def artifact_link(experiment_id: str, run_id: str, path: str) -> str:
    return f"#/experiments/{experiment_id}/runs/{run_id}/artifactPath/{path}?{_VIEW}"


def _fmt(v) -> str:
    n = _number(v)
    return "not measured" if n is None else f"{n:.4g}"


def sweep_note(name: str, rows: list[dict], status: str, experiment_id: str, parent_id: str) -> str:
    """The sweep's description; its grid is the param `grid`."""
    counts = {s: sum(r.get("status", "").startswith(s) for r in rows) for s in ("FINISHED", "FAILED", "SKIPPED")}
    lines = [f"**rlbench sweep** {name} · {status}",
             "",
             f"{len(rows)} jobs: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n)]
    best = best_row(rows)
    if best is not None and "runs" in best:
        lines += ["", f"Best (shortest median task): `{best['name']}` ({best['finished']} of {best['runs']} runs "
                      f"finished, jobs {', '.join(map(str, best['jobs']))}): "
                      + ", ".join(f"{m} {best['spread'][m].text() if best['spread'][m] else _fmt(None)}"
                                  for m in SUMMARY_METRICS)]
    elif best is not None:
        lines += ["", f"Best (shortest task): job {best['job']} `{best.get('name') or best.get('overrides') or '(defaults)'}`: "
                      + ", ".join(f"{m} {_fmt(best.get(m))}" for m in SUMMARY_METRICS)]
    if best is not None and best["rivals"]:
        lines += ["", "Not told apart from it: " + "; ".join(f"`{n}` ({why})" for n, why in best["rivals"])]
    elif best is not None and not repeated(rows) and sum(r.get("status") == "FINISHED" for r in rows) > 1:
        lines += ["", f"({SINGLE_RUN})"]
    ids = [r["run_id"] for r in rows if r.get("run_id")]
    if ids:
        lines += ["", (f"[Compare the jobs]({compare_link(experiment_id, ids)}) · summary table: "
                      f"[summary.csv]({artifact_link(experiment_id, parent_id, 'summary.csv')})")]
    lines += ["", REPORT_MARK, "", f"Not made yet: `python -m rlbench.report --sweep {parent_id}`"]
    return "\n".join(lines)


def with_report(note: str | None, verdict: list[str], experiment_id: str, parent_id: str) -> str:
    """The note with its report section replaced by the verdict and the report's link."""
    head = (note or "").split(REPORT_MARK, 1)[0].rstrip()
    section = [REPORT_MARK, "", (f"[Report]({artifact_link(experiment_id, parent_id, 'report/report.html')})"
               f" · [findings.json]({artifact_link(experiment_id, parent_id, 'report/findings.json')})"), ""]
    section += [f"- {line}" for line in verdict] or ["- (no verdict: no finished job to judge)"]
    return "\n".join(([head, ""] if head else []) + section)


def source_tags(kind: str) -> dict[str, str]:
    """MLflow's user and source tags (a run made with MlflowClient.create_run gets none)."""
    return {"mlflow.user": getpass.getuser(), "mlflow.source.type": "LOCAL",
            "mlflow.source.name": f"rlbench {kind}",  # the UI shows a source's last path part: no paths here
            "rlbench.command": " ".join(["python -m rlbench", *sys.argv[1:]])[:5000]}
