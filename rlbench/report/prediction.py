"""The report's predicted-vs-measured section: when a profile of the study's host exists
(`python -m rlbench.profile`), every finished job is predicted from it (rlbench.predict) and
drawn against what it measured, naming the profile; the jobs the model misses by more than
15% are listed (for a search: where the prediction and the measured trials disagree). docs/predict.md."""

from __future__ import annotations

from rlbench.core.repeats import group_by
from rlbench.predict.accuracy import check_jobs, prediction_error
from rlbench.predict.curves import ProfileError, load_profile, profile_command
from rlbench.predict.jobs import Machine
from rlbench.predict.report import disagreements, validation_figure
from rlbench.report.figures import Drawn
from rlbench.report.findings import precision
from rlbench.tracking.study_records import Study

NAME, TITLE = "predicted_vs_measured", "Predicted (rlbench.predict) vs measured fps and runtime_s"


def profile_for(study: Study, jobs: list | None = None) -> tuple[str | None, str]:
    """(profile run id, how it was chosen) or (None, why there is none), for `jobs` (default:
    the study's finished jobs), which must share an env, an algorithm and a precision."""
    from rlbench.tracking.profiles import profile_runs  # lazy: keeps mlflow, torch off the start

    named = study.parent_tags.get("warm_start_profile") or study.parent_tags.get("prediction_profile_run")
    if named:
        return named, "named on the parent run"
    host = study.host.get("host")
    pairs = {
        (j.params.get("env.id"), j.params.get("algo.name"), j.params.get("precision", "fp32"))
        for j in (study.finished if jobs is None else jobs)
    }
    if len(pairs) != 1:
        return None, (
            f"the finished jobs span {len(pairs)} env/algorithm/precision triples ({sorted(map(str, pairs))}); "
            "a profile measures one (python -m rlbench.predict --validate predicts each precision "
            "from its own)"
        )
    ((env_id, algo, precision),) = pairs
    found = profile_runs(host, env_id, algo, precision=precision)
    if not found:
        kind = study.finished[0].params.get("env.kind")
        also = f" precision={precision}" if precision != "fp32" else ""
        return None, (
            f"no profile of host {host!r} for env {env_id!r}, algo {algo!r} and precision {precision} in "
            f"experiment rlbench-profiles; make one on that host: {profile_command(env_id, kind, algo)}{also}"
        )
    return found[0], f"the newest profile of host {host!r} for {env_id}, {algo}" + (
        f", {precision}" if precision != "fp32" else ""
    )


def prediction_section(study: Study) -> tuple[Drawn, dict]:
    """(the figure, findings["prediction"]: profile, prediction_error, per-metric errors, disagreements)."""

    named = study.parent_tags.get("warm_start_profile") or study.parent_tags.get("prediction_profile_run")
    # a precision sweep: each precision's jobs from the profile of that precision (the one --validate
    # named for it, else the newest); a profile named for the whole study serves all
    by_tag = dict(x.split("=", 1) for x in study.parent_tags.get("prediction_profile_runs", "").split(",") if "=" in x)
    groups = {"all": study.jobs} if named else group_by(study.jobs, precision)
    checked, used = [], []
    try:
        for p, js in groups.items():
            if not any(j.finished for j in js):
                continue
            run_id, how = (
                (by_tag[p], "named on the parent run for its precision")
                if p in by_tag and not named
                else profile_for(study, [j for j in js if j.finished])
            )
            if run_id is None:
                return Drawn(NAME, TITLE, None, how), {"text": f"not predicted: {how}"}
            profile = load_profile(run_id)
            m = Machine(profile, profile)
            checked += check_jobs(js, m)
            used.append((run_id, f"{m.names()} ({how})"))
        error, per = prediction_error(checked)
    except (ProfileError, ValueError, LookupError) as e:
        return Drawn(NAME, TITLE, None, f"not predicted: {e}"), {"text": f"not predicted: {e}"}
    off = disagreements(checked)
    names = "; ".join(n for _, n in used)
    text = (
        f"prediction_error={error:.4f} (median abs. % error: fps {per['fps']:.3f}, runtime_s {per['runtime_s']:.3f}) "
        f"over {len(checked)} jobs with {names}; "
        + (f"{len(off)} job(s) off by more than 15%" if off else "every job within 15%")
    )
    fig = validation_figure(checked, names, error)
    return Drawn(NAME, TITLE, fig), {
        "text": text,
        "profile": ",".join(r for r, _ in used),
        "prediction_error": error,
        "mdape": per,
        "disagreements": off,
    }
