"""A GPU study stage's summary (pipelines/gpu_study.py --stage): per job its rates, power and
start-up; per configuration the median (min..max); each difference the stage names with its
noise floor beside it; the CPU/GPU ratio in threads per SM and per fp32 TFLOP/s; the idle power.
Warm-up runs are not jobs here. `stage_summary(...)` is plain data, `stage_markdown` its page.
"""

from __future__ import annotations

import itertools

from rlbench.core.precision import published_sms
from rlbench.core.repeats import Spread, group_by, spread
from rlbench.core.verdict import difference, noise_floor
from rlbench.predict.datasheet import Gpu, equivalent_sms, ratio_two_units
from rlbench.report.one_page import Notes
from rlbench.tracking.study_records import JobRun, Study

STEADY = (
    "steady/fps",
    "steady/fps_min",
    "steady/fps_max",
    "steady/windows",
    "steady/s",
    "steady/learner_updates_per_s",
    "steady/power_gpu_w",
    "steady/frames_per_j",
)
JOB_COLUMNS = (
    "steady/fps",
    "task_fps",
    "runtime_s",
    "learner_updates_per_s",
    "steady/learner_updates_per_s",
    "power_gpu_w_avg",
    "perf_per_watt",
    "steady/frames_per_j",
    "gpu_util_avg",
    "cpu_gpu_ratio",
    "start_s",
    "job_start_envs_s",
)
NOT_LOGGED = "not logged by this rlbench"
LOGGED_SINCE = ("steady/", "job_start_envs_s")  # metrics a finished job of an older rlbench lacks (prefixes)
V100, H200 = Gpu("Tesla V100", 80, 7), Gpu("NVIDIA H200", 132, 9)


def point_name(j: JobRun) -> str:
    sm, threads = j.knob("sm_limit"), j.knob("actor_threads")
    return (
        f"actors={j.actors} sm_limit={'all' if sm is None else int(sm)} "
        f"actor_threads={'null' if threads is None else int(threads)}"
    )


def job_value(j: JobRun, key: str) -> dict:
    """A job's value, or null with its reason; start_s: the run's wall time less its task."""
    if key == "start_s":
        if j.wall_s is not None and j.value("runtime_s") is not None:
            return {"value": j.wall_s - j.value("runtime_s")}
        return {"value": None, "reason": j.why_missing("runtime_s") if j.wall_s else "the run has no end time"}
    v = j.value(key)
    if v is not None:
        return {"value": v}
    if j.finished and key.startswith(LOGGED_SINCE) and key not in j.nulls:
        return {"value": None, "reason": NOT_LOGGED}
    return {"value": None, "reason": j.why_missing(key)}


def rate_metric(study: Study) -> str:
    """What the stage compares: the steady fps where every finished job logged one above 0, else
    task_fps (a job too short for a steady rate, or one logged before 2026-11-27, when steady/fps
    was the median 1-s window: 0 frames/s for actors that run in bursts)."""
    done = study.finished
    steady = [j.value("steady/fps") for j in done]
    return "steady/fps" if done and all(v is not None and v > 0 for v in steady) else "task_fps"


def compare(base: Spread, other: Spread, floor: float | None) -> dict:
    """The one place a stage tells two configurations apart, by the verdict's rule
    (rlbench/core/verdict.py): their relative difference against the stage's noise floor
    `floor` (None: unknown). `change` is signed: other over base, less 1."""
    if base.median <= 0 or other.median <= 0:  # a rate of 0 bounds no ratio
        return {"change": None, "noise_floor": floor, "told_apart": None}
    told = None if floor is None else difference(base.median, other.median) > floor
    return {"change": other.median / base.median - 1, "noise_floor": floor, "told_apart": told}


def _order(j: JobRun) -> tuple:
    """Every unit first, then fewer; at each, null threads first, then more."""
    sm, threads = j.knob("sm_limit"), j.knob("actor_threads")
    return (j.actors or 0, sm is not None, -(sm or 0), threads is not None, threads or 0)


def config_rows(study: Study, metric: str) -> list[dict]:
    """Per configuration (actors, then every unit before fewer, null threads before a count): runs,
    finished, and per column its Spread."""
    out = []
    for name, jobs in group_by(sorted(study.jobs, key=_order), point_name).items():
        done = [j for j in jobs if j.finished]
        out.append(
            {"config": name, "runs": len(jobs), "finished": len(done), "knobs": _knobs(done or jobs)}
            | {k: spread(job_value(j, k)["value"] for j in done) for k in (*JOB_COLUMNS, metric)}
        )
    return out


def _knobs(jobs: list[JobRun]) -> dict:
    j = jobs[0]
    return {
        "actors": j.actors,
        "sm_limit": j.knob("sm_limit"),
        "actor_threads": j.knob("actor_threads"),
        "sm_granted": j.value("sm_granted"),
        "threads_used": j.value("actor_threads_used"),
    }


def differences(stage: str, rows: list[dict], metric: str) -> list[dict]:
    """The differences the stage names: actors, each count against the one before; sms, each
    limit against every SM; cpu, each thread count against null (unpinned) and each same-ratio
    pair against the same threads on every SM."""
    pairs = []
    if stage == "actors":
        pairs = list(itertools.pairwise(rows))
    elif stage == "sms":
        pairs = [(rows[0], r) for r in rows[1:]]
    elif stage == "cpu":
        every = {r["knobs"]["actor_threads"]: r for r in rows if r["knobs"]["sm_limit"] is None}
        for r in rows:
            k = r["knobs"]
            base = every.get(None) if k["sm_limit"] is None else every.get(k["actor_threads"])
            if base is not None and base is not r:
                pairs.append((base, r))
    out, floor = [], noise_floor(r[metric] for r in rows if r[metric] is not None)
    for a, b in pairs:
        if a[metric] is None or b[metric] is None:
            out.append(
                {
                    "base": a["config"],
                    "other": b["config"],
                    "value": None,
                    "reason": f"no finished run with {metric} in one of them",
                }
            )
        else:
            out.append(
                {"base": a["config"], "other": b["config"], "metric": metric} | compare(a[metric], b[metric], floor)
            )
    return out


def ratios(rows: list[dict], gpu_name: str | None) -> list[dict]:
    """Each configuration's actor threads per granted unit, and per fp32 TFLOP/s of them (datasheet)."""
    found = published_sms(gpu_name) if gpu_name else None
    gpu = Gpu(gpu_name, *found) if found else None
    out = []
    for r in rows:
        k = r["knobs"]
        threads, units = k["threads_used"], k["sm_granted"]
        if threads is None or units is None:
            out.append({"config": r["config"], "value": None, "reason": "no finished run logged its threads and units"})
        elif gpu is None:
            why = "no GPU: the units are CPU threads" if not gpu_name else f"no datasheet for {gpu_name}"
            out.append(
                {
                    "config": r["config"],
                    "threads_per_sm": threads / units,
                    "threads_per_fp32_tflops": None,
                    "reason": why,
                }
            )
        else:
            out.append({"config": r["config"]} | ratio_two_units(int(threads), gpu, int(units)))
    return out


def stage_summary(stage: str, study: Study, fingerprint: dict, idle: dict, run: dict) -> dict:
    """Everything the stage's page shows, as plain data (summary.json)."""
    metric = rate_metric(study)
    rows = config_rows(study, metric)
    known = [r for r in rows if r[metric] is not None]
    best = max(known, key=lambda r: r[metric].median) if known else None
    jobs = [
        {"name": point_name(j), "status": j.status, "run_id": j.run_id, "repeat_group": j.config}
        | {k: job_value(j, k) for k in (*JOB_COLUMNS, *STEADY)}
        for j in sorted(study.jobs, key=_order)
    ]
    return {
        "stage": stage,
        "fingerprint": fingerprint,
        "host": study.host_label(),
        "run": run,
        "metric": metric,
        "idle_power_gpu_w": idle,
        "jobs": jobs,
        "configs": [{**r, **{k: r[k].as_dict() if r[k] else None for k in (*JOB_COLUMNS, metric)}} for r in rows],
        "differences": differences(stage, rows, metric),
        "ratio": ratios(rows, fingerprint.get("gpu_name")),
        "best": best and {"config": best["config"], "actors": best["knobs"]["actors"]},
        "v100_40_sms_as_h200_sms": round(equivalent_sms(40, V100, H200), 2),
    }


def _spread_cell(v: dict | None, fmt: str = "{:.4g}") -> str:
    if v is None:
        return "null"
    m = fmt.format(v["median"])
    return m if v["n"] == 1 else f"{m} ({fmt.format(v['low'])}..{fmt.format(v['high'])}, n={v['n']})"


def _idle(idle: dict) -> str:
    if idle.get("value") is None:
        return f"null ({idle.get('reason', 'unknown')})"
    if "parts" in idle:  # joined parts (pipelines/gpu_study.py --join): each part measured its own
        w = idle["parts"]
        return f"{idle['value']:.1f} W (the median of {len(w)} parts' medians, {min(w):.1f}..{max(w):.1f} W, NVML)"
    where = (
        f" (median; {idle['low']:.1f}..{idle['high']:.1f} over {idle['n']} samples in {idle['seconds']:g} s, NVML)"
        if "n" in idle
        else ""
    )
    return f"{idle['value']:.1f} W{where}"


def _difference(d: dict) -> str:
    if d.get("value", 0) is None:
        return f"- {d['other']} against {d['base']}: null ({d['reason']})"
    if d["change"] is None:
        return f"- {d['other']} against {d['base']}: {d['metric']} null (a median of 0 bounds no ratio)"
    apart = difference(1.0, 1.0 + d["change"])  # the verdict's measure: the larger over the smaller
    digits = _digits(apart, d["noise_floor"])
    floor = (
        "noise floor unknown (one run each)"
        if d["noise_floor"] is None
        else f"noise floor {d['noise_floor']:.{digits}%}"
    )
    verdict = "" if d["told_apart"] is None else ("; told apart" if d["told_apart"] else "; not told apart")
    return (
        f"- {d['other']} against {d['base']}: {d['metric']} {d['change']:+.1%} "
        f"({apart:.{digits}%} apart, the larger over the smaller), {floor}{verdict}"
    )


def _digits(apart: float, floor: float | None) -> int:
    """Decimals of a percentage that show the difference and the floor apart where they are
    (1, up to 3 at the floor's edge), so a text never reads "3.5% ... 3.5%: told apart"."""
    for digits in (1, 2):
        if floor is None or round(apart * 100, digits) != round(floor * 100, digits):
            return digits
    return 3


def _ratio(r: dict) -> str:
    if r.get("threads_per_sm") is None:
        return f"- {r['config']}: null ({r['reason']})"
    per_tf = (
        f"{r['threads_per_fp32_tflops']:.3g} per fp32 TFLOP/s"
        if r["threads_per_fp32_tflops"] is not None
        else f"per fp32 TFLOP/s null ({r['reason']})"
    )
    return f"- {r['config']}: {r['threads_per_sm']:.3g} threads per unit, {per_tf}"


def stage_markdown(s: dict) -> str:
    f, run, idle = s["fingerprint"], s["run"], s["idle_power_gpu_w"]
    gpu = f"GPU {f['gpu_name']} ({f.get('gpu_sm_count', '?')} SMs)" if f.get("gpu_name") else "no CUDA GPU"
    notes = Notes()
    lines = [
        f"# GPU study, {s['stage']} stage, on {s['host']}",
        "",
        (
            f"- commit {f.get('git_commit', '?')}; torch {f.get('torch_version', '?')}; {gpu}; "
            f"{f.get('hardware_threads', '?')} CPU threads ({f.get('cpu_model', '?')})"
        ),
        f"- command: `{run.get('command', '?')}`; budget {run['budget_s']:.0f} s, used {run['used_s']:.0f} s",
        f"- task: {run.get('task', '?')}; one warm-up job first in the stage's process (run `warmup`, not counted)",
        f"- idle GPU power before the first job: {_idle(idle)}",
        *[f"- {e}" for e in run.get("events", [])],
        "",
        "| job | status | steady fps | task fps | learner updates/s | GPU W | perf/W | NVML util | start s | envs s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for j in s["jobs"]:
        cells = [
            notes.cell(j[k], fmt)
            for k, fmt in (
                ("steady/fps", "{:.0f}"),
                ("task_fps", "{:.0f}"),
                ("learner_updates_per_s", "{:.2f}"),
                ("power_gpu_w_avg", "{:.0f}"),
                ("perf_per_watt", "{:.0f}"),
                ("gpu_util_avg", "{:.2f}"),
                ("start_s", "{:.1f}"),
                ("job_start_envs_s", "{:.1f}"),
            )
        ]
        lines.append(f"| {j['name']} | {j['status']} | " + " | ".join(cells) + " |")
    lines += [""] + [f"- [{i}] {why}" for i, why in enumerate(notes.reasons, 1)]
    lines += [
        "",
        f"Per configuration, median (min..max, n) of its finished runs; compared by `{s['metric']}`:",
        "",
        f"| configuration | runs | {s['metric']} | learner updates/s | GPU W | perf/W | start s |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in s["configs"]:
        cells = [
            _spread_cell(c[k])
            for k in (s["metric"], "learner_updates_per_s", "power_gpu_w_avg", "perf_per_watt", "start_s")
        ]
        lines.append(f"| {c['config']} | {c['finished']} of {c['runs']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Differences (noise floor: the wider min..max range of the two, over the base's median):",
        *[_difference(d) for d in s["differences"]],
        "",
        "The CPU/GPU ratio in two units (actor threads used, units granted; fp32 peak from the datasheet):",
        *[_ratio(r) for r in s["ratio"]],
        f"- by fp32 peak, 40 V100 SMs (the paper's ratio-1 point) are {s['v100_40_sms_as_h200_sms']:.1f} H200 SMs",
        "",
        f"- best configuration by {s['metric']}: " + (s["best"]["config"] if s["best"] else "null (none finished)"),
    ]
    return "\n".join(lines) + "\n"
