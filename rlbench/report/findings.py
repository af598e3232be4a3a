"""A study's answer, computed once (study_result: the verdict, the knee per actor series, the
bound per job, the recommended ratio, the paper's rule, in one Result), and findings.json,
which renders it with the study's other findings (the rules: core/verdict.py, report/rules.py).
docs/metrics.md, "Report artifacts".
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, replace

from rlbench.core.bound import bottleneck
from rlbench.core.repeats import STAT_METRICS, group_by, spread
from rlbench.core.verdict import (
    NO_GPU_RATIO,
    REPEATS,
    Knee,
    Result,
    Verdict,
    judge_runs,
    knee,
    recommend,
    settings,
    study_rule,
)
from rlbench.report.rules import actor_saturation, learner_ceiling_fps, on_off_policy, precision_shift
from rlbench.report.series import actor_axis, series
from rlbench.tracking.study_records import JobRun, Study


def _int(v) -> int | None:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def study_verdict(study: Study) -> Verdict:
    """The verdict rule (rlbench/core/verdict.py) over the study's finished runs by configuration,
    with the metric and noise floor minimum its sweep judged by (its parent's tags)."""
    metric, floor_min = settings(study.parent_tags)
    by_config = group_by(study.finished, lambda j: j.config)
    return judge_runs(by_config, metric, floor_min, lambda j, k: j.value(k))


def knees(study: Study, knee_share: float, floor: float | None) -> dict[str, Knee]:
    """Per actor series: the knee (verdict.knee) of its median runtime_s, told apart by `floor`."""
    threads = _int(study.host.get("hardware_threads"))
    out = {}
    for g, js in series(study.finished, "actors", "actors").items():  # repeats of an actor count: their median
        by_actors = group_by(js, lambda j: j.actors)
        runs = {a: spread(j.value("runtime_s") for j in rs) for a, rs in by_actors.items()}
        runtimes = {a: s.median for a, s in runs.items() if s is not None}
        fps = {a: s.median for a, rs in by_actors.items() if (s := spread(j.value("fps") for j in rs)) is not None}
        if len(runtimes) >= 2:
            k = knee(runtimes, knee_share, fps, floor)
            out[g] = replace(
                k,
                text=f"{k.text}; this host has {threads} HW threads",
                runs={a: s.as_dict() for a, s in runs.items() if s is not None},
            )
    return out


def study_result(study: Study, knee_share: float = 0.10, tolerance: float = 0.05) -> Result:
    """The study's Result, computed once: the verdict, the knee per actor series, the bound per
    job and per configuration, the recommended ratio and the paper's rule."""
    v = study_verdict(study)
    candidates = recommend_candidates(study.finished, configurations(study.finished))
    single = v.source != REPEATS  # the rule and the knee compare runtime_s: only repeats measure its noise
    return Result(
        verdict=v,
        knees=knees(study, knee_share, None if single else v.floor),
        bounds={j.name: asdict(bottleneck(j.metrics)) for j in study.finished},  # per run: the jobs table
        config_bounds=config_bounds(study.finished),
        recommendation=recommend(candidates, tolerance, ratios=not study.without_gpu, verdict=v),
        study_rule=NO_GPU_RATIO if study.without_gpu else paper_rule(study, candidates, single),
        knee_share=knee_share,
        tolerance=tolerance,
    )


def paper_rule(study: Study, candidates: list[dict], single: bool) -> str:
    """The paper's rule (ratio >= 1) for the study's host, against its finished configurations."""
    units = [j.value("sm_total") for j in study.finished if j.value("sm_total")]
    timed = [(c["ratio"], c["runtime_s"]) for c in candidates if c["ratio"] is not None and c["runtime_s"] is not None]
    threads = _int(study.host.get("hardware_threads"))
    return study_rule(threads, _int(max(units)) if units else None, study.compute_unit, timed, single)


def findings(study: Study, knee_share: float = 0.10, tolerance: float = 0.05) -> dict:
    """findings.json: the study's Result (study_result) and its other findings."""
    return findings_of(study, study_result(study, knee_share, tolerance))


def findings_of(study: Study, r: Result) -> dict:
    """findings.json as a dict: the Result `r` rendered, with the study's other findings."""
    not_done = [
        {"name": j.name, "status": j.status, "run_id": j.run_id, "reason": j.error or "no error recorded"}
        for j in study.not_finished
    ]
    onoff = on_off_policy(algorithm_shares(study))
    scaled = saturation(study.finished)
    shift = precision_shift(precision_best(study.finished))
    configs = configurations(study.finished)
    return {
        "verdict": r.verdict.as_dict(),
        "precision": asdict(shift) if shift else None,
        "knee": {g: asdict(k) for g, k in r.knees.items()},
        "bottleneck": dict(r.bounds),
        "bound_per_config": dict(r.config_bounds),
        "recommendation": asdict(r.recommendation) if r.recommendation else None,
        "configurations": {name: {m: s.as_dict() if s else None for m, s in c.items()} for name, c in configs.items()},
        "on_off_policy": asdict(onoff) if onoff else None,
        "saturation": asdict(scaled) if scaled else None,
        "study_rule": r.study_rule,
        "not_finished": not_done,
        "missing": study.missing,
        "knee_share": r.knee_share,
        "tolerance": r.tolerance,
    }


_CANDIDATE = {"fps": "fps", "runtime_s": "runtime_s", "energy_j": "energy_per_task_j"}  # recommend's keys


def configurations(jobs: list[JobRun]) -> dict[str, dict]:
    """Finished runs by configuration (JobRun.config: repeats share one): per metric of
    STAT_METRICS the Spread (median, min..max, n) of its runs, None where none measured it."""
    return {
        name: {m: spread(j.value(m) for j in rs) for m in STAT_METRICS}
        for name, rs in group_by(jobs, lambda j: j.config).items()
    }


def config_bounds(jobs: list[JobRun]) -> dict[str, dict]:
    """Per configuration, what bounds it: the rule (rlbench/core/bound.py) on its runs' median
    metrics; with repeats, said so, and where its runs' own bounds disagree, how."""
    out = {}
    for name, rs in group_by(jobs, lambda j: j.config).items():
        keys = sorted(set().union(*(r.metrics for r in rs)))
        med = {
            k: statistics.median(vs) for k in keys if (vs := [r.metrics[k] for r in rs if r.metrics.get(k) is not None])
        }
        b, kinds = bottleneck(med), Counter(bottleneck(r.metrics).kind for r in rs)
        text = b.text
        if len(rs) > 1:
            text += f"; median shares of its {len(rs)} runs"
            if len(kinds) > 1:
                text += "; its runs disagree: " + ", ".join(f"{k} in {n}" for k, n in kinds.most_common())
        out[name] = asdict(b) | {"text": text, "runs": len(rs), "kinds": dict(kinds)}
    return out


def recommend_candidates(jobs: list[JobRun], configs: dict[str, dict]) -> list[dict]:
    """recommend's input: one candidate per configuration, its medians and its runtime spread."""
    out = []
    for name, rs in group_by(jobs, lambda j: j.config).items():
        c, runtime = configs[name], configs[name]["runtime_s"]
        out.append(
            {
                "name": name,
                "ratio": rs[0].knob("cpu_gpu_ratio"),
                "runs": runtime.n if runtime else len(rs),
                "runtime_spread": runtime.width if runtime else None,
                "runtime_runs": [j.value("runtime_s") for j in rs],
            }
            | {k: c[m].median if c[m] else None for k, m in _CANDIDATE.items()}
        )
    return out


def precision(j: JobRun) -> str:
    return j.params.get("precision") or "fp32"  # a job without the param ran fp32


def precision_best(jobs: list[JobRun]) -> dict[str, dict]:
    """precision -> its fastest configuration (the least median runtime_s): actors, runtime_s,
    cpu_gpu_ratio, what bounds it, learner_mfu; {} when the jobs ran at one precision."""
    by_precision = group_by(jobs, precision)
    if len(by_precision) < 2:
        return {}
    out = {}
    for p, js in by_precision.items():
        configs = group_by(js, lambda j: j.config)
        runtimes = {n: s.median for n, rs in configs.items() if (s := spread(j.value("runtime_s") for j in rs))}
        if not runtimes:
            continue
        name = min(runtimes, key=runtimes.get)
        j = configs[name][0]
        mfu = spread(r.value("learner_mfu") for r in configs[name])
        out[p] = {
            "actors": j.actors,
            "runtime_s": runtimes[name],
            "ratio": j.knob("cpu_gpu_ratio"),
            "bound": bottleneck(j.metrics).text or bottleneck(j.metrics).kind,
            "learner_mfu": mfu.median if mfu else None,
        }
    return out


def algorithm_shares(study: Study) -> dict[str, list[tuple[float, float | None]]]:
    """algo.name -> (sim_share, learner_share) of each finished job that logged them."""
    out: dict[str, list] = {}
    for j in study.finished:
        if j.params.get("algo.name") and j.value("sim_share") is not None:
            out.setdefault(j.params["algo.name"], []).append((j.value("sim_share"), j.value("learner_share")))
    return out


def saturation(jobs: list[JobRun], share: float = 0.10):
    """How many actor hosts (or processes) saturate one learner (rules.actor_saturation), from
    the median runtime_s and fps per count; None where the jobs do not vary either."""
    axis = actor_axis(jobs)
    if axis is None:
        return None
    points = {}
    for count, rs in group_by(jobs, lambda j: int(j.knob(axis) or 0)).items():
        run, fps = spread(j.value("runtime_s") for j in rs), spread(j.value("fps") for j in rs)
        if run is None or fps is None:
            continue
        ceilings = [c for j in rs if (c := learner_ceiling_fps(j.metrics)) is not None]
        points[count] = {
            "runtime_s": run.median,
            "fps": fps.median,
            "bound": bottleneck(rs[0].metrics).kind,
            "ceiling_fps": statistics.median(ceilings) if ceilings else None,
        }
    return actor_saturation(points, axis, share)


def verdict_lines(f: dict) -> list[str]:
    """The verdict in plain sentences, in the order a reader asks: the answer (rlbench/core/verdict.py)
    and its comparisons first."""
    v = f.get("verdict")
    lines = [f"verdict: {v['answer']}", *(f"compared: {c['text']}" for c in v["comparisons"])] if v else []
    lines += [f"knee ({k}): {kn['text']}" for k, kn in f["knee"].items()] or [
        "knee: not computed (fewer than two finished actor counts in every series)"
    ]
    lines += [f"bound ({name}): {b['text']}" for name, b in f.get("bound_per_config", f["bottleneck"]).items()]
    rec = f["recommendation"]
    lines.append(f"recommended: {rec['text']}" if rec else "recommended: none (no finished job with a runtime)")
    lines.append(f["study_rule"])
    if f.get("precision"):
        lines.append(f"precision: {f['precision']['text']}")
    if f.get("saturation"):
        lines.append(f"scale-out: {f['saturation']['text']}")
    if f.get("on_off_policy"):
        lines.append(f"on- vs off-policy: {f['on_off_policy']['text']}")
    if f.get("prediction"):
        lines.append(f"model: {f['prediction']['text']}")
        lines += [f"model missed {d}" for d in f["prediction"].get("disagreements", [])]
    lines += [f"NOT FINISHED ({d['status']}): {d['name']}: {d['reason']}" for d in f["not_finished"]]
    lines += [f"MISSING: {m}" for m in f["missing"]]
    return lines
