"""One verdict rule (rlbench/core/verdict.py) everywhere: one store, read by the terminal, the
parent's note, the jobs' tags, summary.json and the report, names one best set and one noise
floor; and the verdict's settings are refused before any work when out of range."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest
from hydra.core.utils import JobReturn, JobStatus

from rlbench.cli.report import main as report_main
from rlbench.config.schema import TrackingConfig, VerdictConfig
from rlbench.core.verdict import judge
from rlbench.report.figures import actor_scaling
from rlbench.sweeps.sweep import run_grid
from rlbench.tracking.experiment import Experiment
from rlbench.tracking.record import rounded
from rlbench.tracking.study_records import load_parent
from tests.conftest import main_in_process
from tests.test_search_repeats import searched

# runtime_s of each repeat: actors=4 best, actors=8 within the floor (10.2 vs 10.0 s: 2.0% <
# 7.9%, actors=8's 10.9 / 10.1), actors=2 told apart (41% slower); unrounded, as a job returns them
TIMES = {
    2: [14.1000004, 14.5000002, 13.9000001],
    4: [10.0000003, 10.4000001, 9.80000004],
    8: [10.2000002, 10.9000004, 10.1000003],
}


@dataclass
class Conf:
    """What the sweep reads of a validated job config."""

    actors: int
    tracking: TrackingConfig
    resume: bool = False
    verdict: VerdictConfig = field(default_factory=VerdictConfig)


# each actor count's steady windows, one run each: (steady/fps, its lowest window, its highest).
# The windows' floor: the widest range of one job's windows, 1700 / 1300 - 1 = 30.8% (actors=4);
# actors=8 best (1540), actors=4 2.7% slower: not told apart; actors=2 54.0% slower: told apart
STEADY = {2: (1000.0, 900.0, 1100.0), 4: (1500.0, 1300.0, 1700.0), 8: (1540.0, 1400.0, 1650.0)}


def _value(overrides: list[str], key: str, default: str | None = None) -> str:
    return next((o.split("=", 1)[1].strip("'") for o in overrides if o.startswith(key + "=")), default)


def steady(actors: int) -> dict:
    """A job's steady-window values (core/steady.py) as it returns and logs them."""
    fps, lo, hi = STEADY[actors]
    return {"steady/fps": fps, "steady/fps_min": lo, "steady/fps_max": hi, "steady/windows": 40}


class RecordingLauncher:
    """Takes all jobs at once; each job writes its run under the sweep's parent as a job does
    (name, repeat tags, final metrics to 6 significant digits) and returns its unrounded result."""

    def launch(self, job_overrides, initial_job_idx):
        return [self.job(o) for o in job_overrides]

    def job(self, overrides: list[str]) -> JobReturn:
        actors, repeat = int(_value(overrides, "actors")), int(_value(overrides, "++tracking.tags.repeat", "0"))
        runtime = TIMES[actors][repeat]
        tags = {
            "mlflow.parentRunId": _value(overrides, "tracking.parent_run_id"),
            "repeat_group": _value(overrides, "++tracking.tags.repeat_group", f"actors={actors}"),
            "repeat": str(repeat),
            "compute_unit": "cpu_thread",
        }
        client = mlflow.MlflowClient()
        run = client.create_run(
            mlflow.get_experiment_by_name("test").experiment_id,
            tags=tags,
            run_name=_value(overrides, "tracking.run_name"),
        )
        result = {
            "runtime_s": runtime,
            "task_fps": 3000 / runtime,
            "fps": 3000 / runtime,
            "cpu_gpu_ratio": 1.0,
            "energy_per_task_j": None,
            "run_id": run.info.run_id,
            "unmeasured": {},
        } | steady(actors)
        for k in ("runtime_s", "task_fps", "fps", "cpu_gpu_ratio", *steady(actors)):
            client.log_metric(run.info.run_id, k, rounded(result[k]), step=0)
        client.log_param(run.info.run_id, "actors", actors)
        client.set_terminated(run.info.run_id, "FINISHED")
        return JobReturn(status=JobStatus.COMPLETED, _return_value=result)


def _sweep(store, floor_min: float, repeats: int = 3, metric: str = "runtime_s") -> None:
    """The sweep `actors=2,4,8 repeats=3` (or one run each) with RecordingLauncher into the real store."""
    tracking = TrackingConfig(uri=store["uri"], experiment="test", artifact_location=str(store["db"].parent / "art"))
    if repeats > 1:
        jobs = [[f"actors={a}", f"seed={1 + k}"] for k in range(repeats) for a in (2, 4, 8)]
    else:
        jobs = [[f"actors={a}"] for a in (2, 4, 8)]
    grid = SimpleNamespace(repeats=repeats, repeat=[k for k in range(repeats) for _ in (2, 4, 8)])
    sweeper = SimpleNamespace(
        launcher=RecordingLauncher(), config=SimpleNamespace(hydra=SimpleNamespace(runtime=SimpleNamespace(choices={})))
    )
    judged = VerdictConfig(metric=metric, noise_floor_min=floor_min)
    confs = [Conf(int(j[0][7:]), tracking, verdict=judged) for j in jobs]
    run_grid(sweeper, ["actors=2,4,8", f"repeats={repeats}"], jobs, confs, grid, store=Experiment)


ONE_FLOOR = {  # verdict.noise_floor_min -> the best set, the floor, the answer, actors=2's comparison
    0.0: (
        ("actors=4", "actors=8"),
        "noise floor 7.9%",
        "not told apart from actors=8 (2.0% slower): noise floor 7.9%",
        "noise floor 7.9%: told apart",
    ),
    0.5: (
        ("actors=4", "actors=2", "actors=8"),
        "noise floor 50.0%",
        "not told apart from actors=2 (41.0% slower), actors=8 (2.0% slower): noise floor 50.0%",
        "noise floor 50.0%: not told apart",
    ),
}


@pytest.mark.parametrize("floor_min", ONE_FLOOR)
def test_one_store_gives_one_best_set_and_one_noise_floor_everywhere(store, tmp_path, capsys, floor_min):
    _sweep(store, floor_min)
    out = capsys.readouterr().out
    parent_id = re.search(r"parent run (\w{32})", out)[1]
    best_set, floor, tied, versus_2 = ONE_FLOOR[floor_min]
    expected = judge({f"actors={a}": [rounded(t) for t in ts] for a, ts in TIMES.items()}, floor_min=floor_min)
    assert (expected.best_set, expected.floor_text()) == (best_set, floor)  # what the fixture means
    # the terminal: the answer, its comparisons and the next command, last
    answer = f"Verdict: Best by median runtime_s: actors=4; {tied}"
    assert f"[rlbench sweep] {answer}" in out
    assert (
        out.strip().splitlines()[-1].startswith(f"[rlbench sweep] Next: python -m rlbench.report --sweep {parent_id}")
    )
    client = mlflow.MlflowClient(store["uri"])
    parent = client.get_run(parent_id)
    note = parent.data.tags["mlflow.note.content"]
    assert answer in note and f"- actors=4 is 41.0% faster than actors=2; {versus_2}" in note
    # the jobs' tags and summary.json: the best set's runs say so, with the same floor
    kids = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'")
    tags = {k.data.tags["repeat_group"]: k.data.tags["verdict"] for k in kids}
    assert _best_set(tags) == best_set and {t.split("; ")[-1] for t in tags.values()} == {floor}
    summary = json.loads(Path(client.download_artifacts(parent_id, "summary.json", str(tmp_path))).read_text())
    rows = dict(zip(summary["columns"], zip(*summary["data"], strict=True), strict=True))
    assert _best_set(dict(zip(rows["config"], rows["verdict"], strict=True))) == best_set
    # the report, from the same store: its verdict line, findings.json and the note it rewrites
    assert report_main(["--sweep", parent_id, "--tracking-uri", store["uri"], "--out", str(tmp_path / "r")]) == 0
    said = capsys.readouterr().out
    assert f"  verdict: {answer.removeprefix('Verdict: ')}" in said
    assert f"  compared: actors=4 is 41.0% faster than actors=2; {versus_2}" in said
    found = json.loads((tmp_path / "r" / "findings.json").read_text())
    assert tuple(found["verdict"]["best_set"]) == best_set and found["verdict"]["floor_text"] == floor
    assert found["recommendation"]["tied"] == sorted(best_set[1:]) and floor in found["recommendation"]["text"]
    assert (
        f"- verdict: {answer.removeprefix('Verdict: ')}" in client.get_run(parent_id).data.tags["mlflow.note.content"]
    )
    foot = " ".join(t.get_text().replace("\n", " ") for t in actor_scaling(load_parent(parent_id)).fig.texts)
    assert answer.removeprefix("Verdict: ") in foot  # the report's figures say it too


WINDOWS_FLOOR = "noise floor 30.8% from the steady windows"


def test_one_run_each_takes_the_floor_from_the_steady_windows_everywhere(store, tmp_path, capsys):
    """verdict.metric=steady/fps, one run per configuration: the floor from the windows' range,
    named so by the terminal, the note, the tags, summary.json, the report and the search."""
    _sweep(store, 0.0, repeats=1, metric="steady/fps")
    out = capsys.readouterr().out
    parent_id = re.search(r"parent run (\w{32})", out)[1]
    answer = f"Best by median steady/fps: actors=8; not told apart from actors=4 (2.7% slower): {WINDOWS_FLOOR}"
    versus_2 = f"actors=8 is 54.0% faster than actors=2; {WINDOWS_FLOOR}: told apart"
    assert f"[rlbench sweep] Verdict: {answer}\n[rlbench sweep] - {versus_2}" in out
    assert (
        out.strip().splitlines()[-1].startswith(f"[rlbench sweep] Next: python -m rlbench.report --sweep {parent_id}")
    )
    client = mlflow.MlflowClient(store["uri"])
    note = client.get_run(parent_id).data.tags["mlflow.note.content"]
    assert answer in note and f"- {versus_2}" in note
    kids = client.search_runs(
        [client.get_run(parent_id).info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    tags = {k.data.tags["repeat_group"]: k.data.tags["verdict"] for k in kids}
    assert tags["actors=8"] == f"best; {WINDOWS_FLOOR}" and _best_set(tags) == ("actors=8", "actors=4")
    assert tags["actors=2"] == f"slower than best: 54.0% slower; {WINDOWS_FLOOR}"
    summary = json.loads(Path(client.download_artifacts(parent_id, "summary.json", str(tmp_path))).read_text())
    rows = dict(zip(summary["columns"], zip(*summary["data"], strict=True), strict=True))
    assert dict(zip(rows["name"], rows["verdict"], strict=True)) == tags
    assert report_main(["--sweep", parent_id, "--tracking-uri", store["uri"], "--out", str(tmp_path / "r")]) == 0
    said = capsys.readouterr().out
    assert f"  verdict: {answer}" in said and f"  compared: {versus_2}" in said
    found = json.loads((tmp_path / "r" / "findings.json").read_text())["verdict"]
    assert (found["floor_source"], found["floor_text"], found["measured_floor"]) == (
        "steady windows",
        WINDOWS_FLOOR,
        None,
    )
    # the search, its trials the same jobs: one run each, judged by the same rule and floor
    _, parent, _ = searched(
        _steady_job, actors=(2, 4, 8), repeats=1, objectives=["steady/fps"], directions=["maximize"]
    )
    trial = "trial {}: actors={} actor_threads=1 sm_limit=2 (asked actor_threads=2)"  # as it ran, then as asked
    assert parent.tags()["verdict"] == answer.replace("actors=8", trial.format(2, 8)).replace(
        "actors=4", trial.format(1, 4)
    )
    assert parent.tags()["best_set"] == f"{trial.format(2, 8)}; {trial.format(1, 4)}"
    assert f"not told apart from it ({WINDOWS_FLOOR}): `{trial.format(1, 4)}`" in parent.note


def _steady_job(overrides):
    """A search trial's job, one run: STEADY's windows, the knobs as a 2-core host grants them."""
    actors = int(_value(overrides, "actors"))
    ran = {"actor_threads_used": 1, "sm_granted": 2, "compute_unit": "sm", "cpu_gpu_ratio": 0.5}
    result = {"runtime_s": TIMES[actors][0], "fps": 3000 / TIMES[actors][0], "run_id": f"run-{actors}"}
    return JobReturn(status=JobStatus.COMPLETED, _return_value=result | ran | steady(actors))


def _best_set(labels: dict[str, str]) -> tuple[str, ...]:
    """The configurations a verdict label calls best or not told apart from it, best first."""
    best = [c for c, t in labels.items() if t.startswith("best")]
    return tuple(best + sorted(c for c, t in labels.items() if t.startswith("not told apart")))


@pytest.mark.parametrize(
    "arg, message",
    [
        ("verdict.noise_floor_min=1.5", "verdict.noise_floor_min=1.5: allowed: a fraction in [0, 1)"),
        ("verdict.noise_floor_min=-0.1", "verdict.noise_floor_min=-0.1: allowed: a fraction in [0, 1)"),
        (
            "verdict.metric=loss",
            (
                "verdict.metric='loss': allowed: a final metric whose better direction is known: "
                "runtime_s, task_fps, fps, steady/fps"
            ),
        ),
        (
            "verdict.metric=energy_per_task_j",
            "verdict.metric='energy_per_task_j': allowed: a final metric whose better",
        ),
        ("verdict.metric=runtime_s,fps", "verdict.metric=runtime_s,fps: allowed: one value per sweep, not a list"),
    ],
)
def test_bad_verdict_settings_are_refused_before_any_work(store, arg, message):
    out = main_in_process(["-m", "actors=2,4", "repeats=3", "env=cartpole", "workload=smoke", arg, *store["overrides"]])
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.startswith(f"rlbench: no job started: {message}"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not mlflow.MlflowClient(store["uri"]).search_experiments(
        filter_string="name = 'test'"
    )


def test_a_single_run_refuses_them_too(store):
    out = main_in_process(["env=cartpole", "workload=smoke", "verdict.noise_floor_min=1", *store["overrides"]])
    assert out.returncode == 2 and "verdict.noise_floor_min=1.0: allowed: a fraction in [0, 1)" in out.stderr


def test_without_a_value_to_compare_the_terminal_and_the_note_still_say_why():
    """A sweep whose jobs logged no steady/fps (each too short for its steady windows) ends with
    that answer and the next command, not silence."""
    from rlbench.core.verdict import rows_result
    from rlbench.sweeps.sweep import ending
    from rlbench.tracking.parent_note import sweep_note

    rows = [
        {"job": i, "name": f"actors={a}", "status": "FINISHED", "runtime_s": 3.0, "run_id": f"r{i}"}
        for i, a in enumerate((2, 4))
    ]
    v = rows_result(rows, "steady/fps")
    said = "Verdict: no verdict: no finished job logged steady/fps (a job with fewer steady windows than "
    assert ending(rows, v, "MLflow UI: x", "python -m rlbench.report --sweep p").splitlines()[-2:] == [
        f"[rlbench sweep] {said}tracking.steady_min_windows has none: its tag `unmeasured` says why)",
        "[rlbench sweep] Next: python -m rlbench.report --sweep p",
    ]
    assert f"\n\n**{said}" in sweep_note("sweep", rows, "FINISHED", "1", "p", v, "c")


def test_a_run_at_zero_leaves_the_noise_floor_unknown_not_a_division_by_zero():
    """A stage of bursty jobs (steady/fps 0 at 128 and 256 actors on 2 cores) once crashed here."""
    from rlbench.core.repeats import spread
    from rlbench.core.verdict import noise_floor

    assert noise_floor([spread([100.0, 110.0]), spread([50.0, 55.0])]) == pytest.approx(0.1)
    assert noise_floor([spread([100.0, 110.0]), spread([0.0, 3000.0])]) is None
    assert noise_floor([spread([0.0])]) is None  # one run: unknown as before


def test_a_difference_of_2x_or_more_reads_as_a_ratio_and_a_smaller_one_as_a_percent():
    """how_much: a percent below 2x, the ratio from 2x (exactly twice: 2.00x); every text of the
    rule (the comparison, the answer, the tied list, the runs' label) says a difference so, and
    the noise floor stays a percent."""
    from rlbench.core.verdict import how_much

    assert [how_much(d) for d in (0.41, 0.999, 1.0, 1.559, 9.0)] == ["41.0%", "99.9%", "2.00x", "2.56x", "10.00x"]
    v = judge({"a": [10.0, 10.0, 10.4], "b": [25.6], "c": [14.1]})  # floor 4.0%: a's repeats
    assert [c.text for c in v.comparisons] == [
        "a is 2.56x faster than b; noise floor 4.0%: told apart",
        "a is 41.0% faster than c; noise floor 4.0%: told apart",
    ]
    assert v.label("b") == "slower than best: 2.56x slower; noise floor 4.0%"
    assert v.label("c") == "slower than best: 41.0% slower; noise floor 4.0%"
    far = judge({"a": [10.0, 10.0, 10.4], "b": [25.6]}).answer()
    assert far.endswith("told apart from all others: at least 2.56x faster than b (noise floor 4.0%)")
    tied = judge({"a": [10.0, 10.0, 10.4], "b": [25.6], "c": [14.1]}, floor_min=2.0).answer()
    assert tied.endswith("not told apart from b (2.56x slower), c (41.0% slower): noise floor 200.0%")
    single = judge({"a": [10.0], "b": [20.0]})  # one run each: the floor unknown
    assert single.label("b").startswith("2.00x slower than best; noise floor unknown")
