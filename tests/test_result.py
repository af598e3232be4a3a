"""One result model (rlbench/core/verdict.py Result): a sweep and a report each compute their
answer once, and every output (the terminal, the parent's note and metrics, the jobs' tags,
summary.json, findings.json, the report's lines, page and figures) only renders that object:
given another Result, each shows the other's answer, and none judges again."""

from __future__ import annotations

import html
import json
from dataclasses import replace

import pytest

import rlbench.core.verdict as verdict_module
from rlbench.core.verdict import Result, judge, rows_result
from rlbench.report import build as build_module
from rlbench.report.build import build_report
from rlbench.report.figures import Drawn
from rlbench.tracking.study_records import JobRun, Study
from tests.test_sweep_logic import Launcher, sweep

HOST = {"host": "h", "cpu_model": "Xeon", "hardware_threads": "8", "gpu_name": "V100", "gpu_sm_count": "80"}
OTHER = judge({"actors=2": [25.0], "actors=4": [50.0]})  # a verdict the jobs' numbers do not give: actors=2 best


@pytest.fixture
def judged(monkeypatch):
    """Counts the verdict rule's judgements (core/verdict.py judge, under every entry to it)."""
    calls = []
    rule = verdict_module.judge

    def counted(*args, **kwargs):
        calls.append(args[0])
        return rule(*args, **kwargs)

    monkeypatch.setattr(verdict_module, "judge", counted)
    return calls


def _outputs(capsys, experiment, parent) -> dict:
    out = capsys.readouterr().out.strip().splitlines()
    return {
        "terminal": out[-4:-1],
        "note": parent.note,
        "tags": {run: tags["verdict"] for run, tags in experiment.run_tags.items()},
        "summary": dict(
            zip(parent.tables["summary.json"]["run_id"], parent.tables["summary.json"]["verdict"], strict=True)
        ),
        "best": parent.metrics["best/runtime_s"],
    }


def test_a_sweep_judges_once_and_every_output_renders_that_result(judged, monkeypatch, capsys):
    made = []

    def spy(rows, *settings):
        made.append(rows_result(rows, *settings))
        return made[-1]

    monkeypatch.setattr("rlbench.sweeps.sweep.rows_result", spy)
    _, experiment, parent = sweep([["actors=2"], ["actors=4"]], Launcher())
    assert len(judged) == 1 and len(made) == 1  # one judgement, at the sweep's end
    (r,) = made
    said = _outputs(capsys, experiment, parent)
    answer = f"Verdict: {r.verdict.answer()}"
    assert said["terminal"][1] == f"[rlbench sweep] {answer}" and f"\n\n**{answer}**\n" in said["note"]
    assert said["tags"] == said["summary"] == {"run-2": r.label("actors=2"), "run-4": r.label("actors=4")}
    assert r.verdict.best == "actors=4" and said["best"] == 25.0


def test_a_sweep_given_another_result_shows_that_one_everywhere(judged, monkeypatch, capsys):
    monkeypatch.setattr("rlbench.sweeps.sweep.rows_result", lambda rows, *settings: Result(OTHER))
    _, experiment, parent = sweep([["actors=2"], ["actors=4"]], Launcher())
    assert judged == []  # OTHER was judged before: the outputs judged nothing
    said = _outputs(capsys, experiment, parent)
    answer = f"Verdict: {OTHER.answer()}"
    assert answer.startswith("Verdict: Best by median runtime_s: actors=2;")
    assert said["terminal"][:2] == ["[rlbench sweep] Best (runtime_s): job 0 actors=2", f"[rlbench sweep] {answer}"]
    assert f"\n\n**{answer}**\n" in said["note"] and "Best (runtime_s): job 0 `actors=2`" in said["note"]
    assert said["tags"] == said["summary"] == {"run-2": "best; noise floor unknown", "run-4": OTHER.label("actors=4")}
    assert said["best"] == 50.0  # the parent's best/ metrics: OTHER's best's row


def _study() -> Study:
    """A sweep over actors 2, 4, 8 (one run each, on 80 SMs) without MLflow."""
    jobs = [
        JobRun(
            f"id{a}",
            f"actors={a}",
            "FINISHED",
            {"actors": str(a)},
            {"actors": float(a), "runtime_s": 80.0 / a, "fps": 100.0 * a, "cpu_gpu_ratio": a / 80, "sm_total": 80.0},
            {},
        )
        for a in (2, 4, 8)
    ]
    return Study("sweep", "result test", "p", HOST, jobs, [])


def _report(tmp_path, monkeypatch) -> dict:
    """build_report on _study, without a profile to predict from; with the figures it drew."""
    no_model = (Drawn("predicted_vs_measured", "model", None, "no profile (test)"), None)
    monkeypatch.setattr(build_module, "prediction_section", lambda study: no_model)
    drawn, figures = [], build_module.all_figures
    monkeypatch.setattr(build_module, "all_figures", lambda *a: drawn.extend(figures(*a)) or drawn)
    return build_report(_study(), tmp_path) | {"drawn": [d for d in drawn if d.fig is not None]}


def test_a_report_judges_once_and_its_outputs_render_that_result(judged, tmp_path, monkeypatch):
    out = _report(tmp_path, monkeypatch)
    r = out["result"]
    assert len(judged) == 1 and r.verdict.best == "actors=8"
    found = json.loads((tmp_path / "findings.json").read_text())
    assert found["verdict"]["answer"] == r.verdict.answer() and found["study_rule"] == r.study_rule
    assert found["recommendation"]["text"] == r.recommendation.text and set(found["knee"]) == set(r.knees)
    assert out["lines"][0] == f"verdict: {r.verdict.answer()}" and r.study_rule in out["lines"]
    assert html.escape(r.study_rule) in (tmp_path / "report.html").read_text()
    foot = " ".join(t.get_text().replace("\n", " ") for t in out["drawn"][0].fig.texts)
    assert " ".join(f"verdict: {r.verdict.answer()}".split()) in " ".join(foot.split())


def test_a_report_given_another_result_shows_that_one_everywhere(judged, tmp_path, monkeypatch):
    real = build_module.study_result

    def other(study, *settings):
        r = real(study, *settings)
        return replace(r, verdict=OTHER, study_rule="the paper's rule: (a test's words)")

    monkeypatch.setattr(build_module, "study_result", other)
    out = _report(tmp_path, monkeypatch)
    assert len(judged) == 1  # the real Result's judgement (OTHER's was before): no output judged
    found = json.loads((tmp_path / "findings.json").read_text())
    assert found["verdict"]["best"] == "actors=2" and found["study_rule"] == "the paper's rule: (a test's words)"
    assert out["lines"][0] == f"verdict: {OTHER.answer()}" and "the paper's rule: (a test's words)" in out["lines"]
    page = (tmp_path / "report.html").read_text()
    assert "the paper&#x27;s rule: (a test&#x27;s words)" in page
    foot = " ".join(t.get_text().replace("\n", " ") for t in out["drawn"][0].fig.texts)
    assert " ".join(f"verdict: {OTHER.answer()}".split()) in " ".join(foot.split())
