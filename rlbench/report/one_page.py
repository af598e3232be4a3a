"""The GPU study's one-page summary (pipelines/gpu_study.py): the host's fingerprint, per job its
runtime, fps, energy per task and GPU-busy time beside the plan's prediction, the knee, the
slowdown at half the SMs, the CPU/GPU ratio and the fp32/bf16 ratio; every value unknown is
null with its reason. `summary(...)` is plain data (summary.json), `markdown` its page. docs/gpu.md.
"""

from __future__ import annotations

from rlbench.report.findings import findings, precision
from rlbench.tracking.study_records import JobRun, Study
from rlbench.tracking.unmeasured import explain

COLUMNS = ("runtime_s", "fps", "energy_per_task_j", "gpu_busy_frac")


def _value(j: JobRun, metric: str) -> dict:
    v = j.value(metric)
    if v is not None:
        return {"value": v}
    return {"value": None, "reason": explain(metric, j.nulls) or j.why_missing(metric)}


def stage_of(j: JobRun) -> str:
    """The study's stage a job belongs to, by its knobs: another precision, fewer units, or the actor sweep."""
    if precision(j) != "fp32":
        return "precision"
    return "actors" if j.knob("sm_limit") is None else "sms"


def job_rows(study: Study, predicted: dict[str, float]) -> list[dict]:
    """One row per job run: its knobs, status, the COLUMNS (null plus reason where unknown), the
    GPU-busy seconds (gpu_busy_frac x runtime_s) and the plan's predicted runtime_s (`predicted`
    by the plan's job name)."""
    rows = []
    for j in study.jobs:
        sm = j.knob("sm_limit")
        name = f"actors={j.actors} sm_limit={'all' if sm is None else int(sm)} precision={precision(j)}"
        row = {
            "name": name,
            "stage": stage_of(j),
            "status": j.status,
            "run_id": j.run_id,
            "sm_granted": j.value("sm_granted"),
        } | {m: _value(j, m) for m in COLUMNS}
        busy, runtime = row["gpu_busy_frac"]["value"], row["runtime_s"]["value"]
        row["gpu_busy_s"] = (
            {"value": busy * runtime}
            if busy is not None and runtime is not None
            else {"value": None, "reason": row["gpu_busy_frac"].get("reason") or "no runtime_s"}
        )
        row["predicted_runtime_s"] = predicted.get(name)
        rows.append(row)
    return rows


def _finished(study: Study, actors: int, sm: float | None = None, prec: str = "fp32") -> JobRun | None:
    """The finished job at these knobs (sm None: every unit), or None."""
    return next(
        (
            j
            for j in study.finished
            if j.actors == actors and j.knob("sm_limit") == sm and precision(j) == prec and j.value("runtime_s")
        ),
        None,
    )


def slowdown_at_half(study: Study, best: int | None, half: int | None) -> dict:
    """runtime_s at `half` the units over runtime_s at all of them, at `best` actors, less 1."""
    if best is None or half is None:
        return {"value": None, "reason": "no best actor count" if best is None else "no half-units point in this plan"}
    full, part = _finished(study, best), _finished(study, best, float(half))
    if full is None or part is None:
        which = "every unit" if full is None else f"sm_limit={half}"
        return {"value": None, "reason": f"the job at {best} actors with {which} did not finish"}
    return {
        "value": part.value("runtime_s") / full.value("runtime_s") - 1,
        "actors": best,
        "sm_limit": half,
        "runtime_s": [full.value("runtime_s"), part.value("runtime_s")],
    }


def precision_ratio(study: Study, best: int | None, compare: str | None) -> dict:
    """fp32's runtime_s over `compare`'s at `best` actors with every unit."""
    if best is None or not compare:
        why = "no best actor count" if best is None else "no precision compared (--compare none)"
        return {"value": None, "reason": why}
    a, b = _finished(study, best), _finished(study, best, None, compare)
    if a is None or b is None:
        return {"value": None, "reason": f"the {'fp32' if a is None else compare} job at {best} actors did not finish"}
    return {"value": a.value("runtime_s") / b.value("runtime_s"), "what": f"runtime_s fp32 / {compare}", "actors": best}


def summary(
    study: Study,
    fingerprint: dict,
    best: int | None,
    half: int | None,
    compare: str | None,
    predicted: dict[str, float],
    run: dict,
) -> dict:
    """Everything the page shows, as plain data; `run` is the script's own record (budget,
    seconds used, stages cut or stopped, the command)."""
    actor_jobs = Study(
        study.kind, study.title, None, study.host, [j for j in study.jobs if stage_of(j) == "actors"], []
    )
    knees = findings(actor_jobs)["knee"] if actor_jobs.finished else {}
    knee = next(iter(knees.values()), None)
    found = findings(study) if study.finished else {"recommendation": None, "study_rule": "no finished job"}
    rec = found["recommendation"]
    ratio = (
        {"value": None, "reason": "no finished job with a runtime"}
        if rec is None
        else {"value": None, "reason": "the jobs ran without a CUDA GPU (sm_limit granted CPU threads)"}
        if study.without_gpu
        else {"value": rec["ratio"], "text": rec["text"]}
        if rec["ratio"] is not None
        else {"value": None, "reason": f"the recommended job logged no cpu_gpu_ratio ({rec['text']})"}
    )
    return {
        "fingerprint": fingerprint,
        "host": study.host_label(),
        "run": run,
        "jobs": job_rows(study, predicted),
        "best_actors": best,
        "knee": {"value": knee["actors"], "text": knee["text"]}
        if knee
        else {"value": None, "reason": "fewer than two actor counts finished"},
        "slowdown_at_half_sms": slowdown_at_half(study, best, half),
        "cpu_gpu_ratio": ratio,
        "study_rule": found["study_rule"],
        "precision_ratio": precision_ratio(study, best, compare),
    }


class Notes:
    """Null cells of the jobs' table point at their reason, each reason written once below it."""

    def __init__(self):
        self.reasons: list[str] = []

    def cell(self, v: dict, fmt: str = "{:.1f}") -> str:
        if v.get("value") is not None:
            return fmt.format(v["value"])
        reason = v.get("reason") or "unknown"
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"null [{self.reasons.index(reason) + 1}]"


def _said(v: dict, fmt: str) -> str:
    """A value with its text, or null with its reason."""
    if v.get("value") is None:
        return f"null ({v.get('reason', 'unknown')})"
    return fmt.format(v["value"]) + (f": {v['text']}" if v.get("text") else "")


def _head(s: dict) -> list[str]:
    f, run = s["fingerprint"], s["run"]
    gpu = f"GPU {f['gpu_name']} ({f.get('gpu_sm_count', '?')} SMs)" if f.get("gpu_name") else "no CUDA GPU"
    return [
        f"# GPU study on {s['host']}",
        "",
        (
            f"- commit {f.get('git_commit', '?')}; torch {f.get('torch_version', '?')}; {gpu}; "
            f"{f.get('hardware_threads', '?')} CPU threads ({f.get('cpu_model', '?')}); host {f.get('host', '?')}"
        ),
        f"- command: `{run.get('command', '?')}`",
        f"- budget {run['budget_s']:.0f} s, used {run['used_s']:.0f} s; task: {run['task']}",
        *[f"- {line}" for line in run.get("events", [])],
        "",
    ]


def markdown(s: dict) -> str:
    notes = Notes()
    lines = _head(s) + [
        "| stage | job | status | runtime_s (predicted) | fps | energy_per_task_j | GPU busy s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in s["jobs"]:
        pred = f" ({r['predicted_runtime_s']:.1f})" if r["predicted_runtime_s"] is not None else ""
        cells = [
            notes.cell(r["runtime_s"]) + pred,
            notes.cell(r["fps"], "{:.0f}"),
            notes.cell(r["energy_per_task_j"], "{:.0f}"),
            notes.cell(r["gpu_busy_s"]),
        ]
        lines.append(f"| {r['stage']} | {r['name']} | {r['status']} | " + " | ".join(cells) + " |")
    lines += [""] + [f"- [{i}] {why}" for i, why in enumerate(notes.reasons, 1)]
    half, prec = s["slowdown_at_half_sms"], s["precision_ratio"]
    where = f" (sm_limit={half['sm_limit']} at {half['actors']} actors)" if half.get("value") is not None else ""
    what = f" ({prec['what']} at {prec['actors']} actors)" if prec.get("value") is not None else ""
    lines += [
        "",
        f"- best actor count (shortest task): {s['best_actors']}",
        f"- knee: {s['knee'].get('text') or _said(s['knee'], '{}')}",
        f"- slowdown at half the SMs: {_said(half, '{:+.1%}')}{where}",
        f"- CPU/GPU ratio of the recommended job: {_said(s['cpu_gpu_ratio'], '{:.3g}')}",
        f"- {s['study_rule']}",
        f"- precision: {_said(prec, '{:.3f}')}{what}",
    ]
    return "\n".join(lines) + "\n"
