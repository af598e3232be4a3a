"""A GPU study stage's summary from its record (pipelines/gpu_study.py --stage): one part's store, or
the parts' stores joined as one stage (--join: every part's runs, the parts' idle power; refused
where the parts are of another stage or another GPU); summary.json and summary.md under --out.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from rlbench.core.errors import Refusal
from rlbench.report.stage_summary import stage_markdown, stage_summary
from rlbench.tracking import store, study_records
from rlbench.tracking.study_records import Study


def stage_study(uri: str, experiment: str) -> Study:
    """The stage's jobs in its store (an empty study where no sweep opened the experiment)."""

    store.use_store(uri)
    try:
        return study_records.load_experiment(experiment)
    except LookupError:
        return Study("experiment", experiment, None, {}, [], [])


def stage_idle(out: Path) -> dict:
    """The idle power the stage's process wrote (null with the reason where it wrote none)."""
    idle_file = out / "idle_power.json"
    if idle_file.is_file():
        return json.loads(idle_file.read_text())
    return {"value": None, "reason": "the stage's process wrote no idle power (it stopped before)"}


def write_summary(out: Path, s: dict) -> str:
    """summary.json and summary.md under `out`; the page's text."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(s, indent=2, default=str))
    (out / "summary.md").write_text(stage_markdown(s))
    return (out / "summary.md").read_text()


def joined_summary(stage: str, parts: list[Path], command: str) -> dict:
    """The parts' stores (each part's --out) summarised as one stage: per configuration every
    part's runs, the idle power the median of the parts'; Refusal where the parts are not all of
    `stage` on one kind of GPU."""

    sums = [json.loads((d / "summary.json").read_text()) for d in parts]
    kinds = {(s["stage"], s["fingerprint"].get("gpu_name", "no GPU")) for s in sums}
    if kinds != {(stage, sums[0]["fingerprint"].get("gpu_name", "no GPU"))}:
        raise Refusal(
            f"--join: parts of {sorted(kinds)}; allowed: parts of the {stage} stage on one kind of GPU "
            "(never H100 numbers with H200 ones)"
        )
    studies, idle = [], [s["idle_power_gpu_w"] for s in sums]
    for d, s in zip(parts, sums, strict=True):
        store.use_store(f"sqlite:///{d}/mlruns/mlflow.db")
        studies.append(study_records.load_experiment(s["run"]["experiment"]))
    watts = [i["value"] for i in idle if i.get("value") is not None]
    joined_idle = (
        {"value": statistics.median(watts), "parts": watts}
        if watts
        else {"value": None, "reason": "; ".join(sorted({i.get("reason", "?") for i in idle}))}
    )
    run = {
        "command": command,
        "experiment": ", ".join(s["run"]["experiment"] for s in sums),
        "budget_s": sums[0]["run"].get("budget_s"),
        "used_s": sum(s["run"].get("used_s") or 0 for s in sums),
        "task": sums[0]["run"].get("task", "").split("; part ")[0] + f"; {len(sums)} parts joined",
        "events": [f"{len(sums)} parts joined: {', '.join(map(str, parts))}"]
        + [e for s in sums for e in s["run"]["events"]],
    }
    study = Study("experiment", run["experiment"], None, studies[0].host, [j for st in studies for j in st.jobs], [])
    return stage_summary(stage, study, sums[0]["fingerprint"], joined_idle, run)
