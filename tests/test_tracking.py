"""What a job and a sweep record, as pure functions: params vs tags, rounding, the `unmeasured`
tag, the parent's summary and description, the sweep's experiment and name."""

import math
from types import SimpleNamespace

import pytest

from rlbench.core.verdict import rows_result
from rlbench.sweeps.sweep import sweep_name, sweep_tracking
from rlbench.tracking.parent_note import REPORT_MARK, best_row, summary_metrics, sweep_note, with_report
from rlbench.tracking.record import params_and_tags, rounded
from rlbench.tracking.unmeasured import format_unmeasured, parse_unmeasured, unmeasured_of
from tests.conftest import plain_table


def test_rounded_keeps_integers_and_six_significant_digits():
    assert rounded(2193.213004631286) == 2193.21
    assert rounded(0.000123456789) == 0.000123457
    assert rounded(3000) == 3000.0 and rounded(123456789.0) == 123456789.0  # counters exact
    assert math.isinf(rounded(math.inf))


def test_params_are_the_config_and_tracking_plumbing_is_tags():
    resolved = {
        "actors": 4,
        "env": {"id": "pong"},
        "hydra": {"x": 1},
        "tracking": {
            "uri": "sqlite:///m.db",
            "parent_run_id": "abc",
            "run_name": "r",
            "tags": {},
            "experiment": "e",
            "log_every_s": 1.0,
            "artifact_location": None,
        },
    }
    params, tags = params_and_tags(resolved, ["actors=4", "tracking.uri=x"])
    assert params == {"actors": "4", "env.id": "pong"}
    assert tags == {
        "tracking.uri": "sqlite:///m.db",
        "tracking.log_every_s": "1.0",
        "overrides": "actors=4 tracking.uri=x",
    }


def test_unmeasured_tag_names_each_reason_once_and_parses_back():
    reasons = {
        "energy_gpu_j": "no GPU: nvml missing",
        "power_gpu_w_avg": "no GPU: nvml missing",
        "energy_cpu_j": "no RAPL | a VM",
        "eval_return_mean20": "eval_envs=0",
    }
    text = format_unmeasured(reasons)
    assert text == (
        "energy_gpu_j, power_gpu_w_avg: no GPU: nvml missing | energy_cpu_j: no RAPL / a VM | "
        "eval_return_mean20: eval_envs=0"
    )
    assert text.count("nvml missing") == 1
    assert parse_unmeasured(text) == reasons | {"energy_cpu_j": "no RAPL / a VM"}
    assert unmeasured_of({"null/energy_dram_j": "old", "unmeasured": text})["energy_dram_j"] == "old"  # older runs
    assert parse_unmeasured(None) == {}


ROWS = [
    {
        "job": 0,
        "name": "actors=2",
        "overrides": "actors=2",
        "status": "FINISHED",
        "runtime_s": 2.0,
        "fps": 1000.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "a" * 32,
    },
    {
        "job": 1,
        "name": "actors=4",
        "overrides": "actors=4",
        "status": "FINISHED",
        "runtime_s": 1.5,
        "fps": 1500.0,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": 0.5,
        "run_id": "b" * 32,
    },
    {
        "job": 2,
        "name": "actors=8",
        "overrides": "actors=8",
        "status": "FAILED",
        "runtime_s": None,
        "fps": None,
        "energy_per_task_j": None,
        "cpu_gpu_ratio": None,
        "run_id": "c" * 32,
    },
]


def test_parent_summary_metrics_are_the_best_jobs_and_the_counts():
    assert best_row(ROWS, rows_result(ROWS))["job"] == 1
    m = summary_metrics(ROWS, rows_result(ROWS))
    assert not [k for k in m if k.startswith("jobs/")]  # per job: the description's table, not index-step charts
    assert m["best/runtime_s"] == 1.5 and "best/energy_per_task_j" not in m  # unknown: not a number
    assert m["jobs_finished"] == 2 and m["jobs_failed"] == 1
    assert best_row([ROWS[2]], rows_result([ROWS[2]])) is None


def test_the_note_opens_with_what_ran_its_links_and_the_verdict_above_mlflows_fold():
    command = "python -m rlbench.report --sweep " + "p" * 32 + " --tracking-uri 'sqlite:////x/mlflow.db'"
    note = sweep_note("sweep actors=2,4,8", ROWS, "FAILED", "7", "p" * 32, rows_result(ROWS), command)
    first = plain_table(note).split("\n")
    head, links = first[0].split(" · [Jobs table](")
    assert head == "**rlbench sweep** actors=2,4,8 · FAILED · 3 jobs: 2 finished, 1 failed"  # not "sweep sweep"
    assert links.startswith("#/experiments/7/runs?viewStateShareKey=rlbench-" + "p" * 32)
    assert "[Charts](" in links and "report: not made yet (its command is below)" in links
    assert first[2].startswith("**Verdict: Best by median runtime_s: actors=4") and first[2].endswith("**")
    assert first[4].startswith("Best (runtime_s): job 1 `actors=4`")
    assert first[6] == "| job | runtime_s | task_fps | fps | energy_per_task_j | bound |"
    assert first[8].startswith(
        "| [actors=2](#/experiments/7/runs/" + "a" * 32 + "?workflowType=machine_learning) | 2 |"
    )
    assert "not measured" in first[8] and "| failed |" in first[10]
    assert note.endswith(f"Not made yet: `{command}`")  # the store named: the report finds the sweep
    assert "job 1 `actors=4`" in note
    updated = with_report(note, ["knee: none", "bound: learner"], "7", "p" * 32)
    assert updated.split("\n")[0].count("[Report](#/experiments/7/runs/" + "p" * 32) == 1  # in the first line too
    assert updated.split(REPORT_MARK)[1].count("[Report](") == 1
    assert (
        "[Report](#/experiments/7/runs/" + "p" * 32 + "/artifactPath/report/report.html?workflowType=machine_learning)"
        in updated
    )
    assert "- knee: none\n- bound: learner" in updated and "Not made yet" not in updated
    assert with_report(updated, ["again"], "7", "p" * 32).count(REPORT_MARK) == 1
    assert with_report(None, [], "7", "p").startswith(REPORT_MARK)  # a parent without a sweep note (a study)


def _conf(experiment):
    from rlbench.config.schema import TrackingConfig

    return SimpleNamespace(tracking=TrackingConfig(experiment=experiment))


def test_a_sweep_over_envs_records_its_jobs_in_one_experiment():
    assert sweep_tracking([_conf("rlbench-pong")] * 2).experiment == "rlbench-pong"
    pinned = sweep_tracking([_conf("rlbench-pong"), _conf("rlbench-breakout"), _conf("rlbench-pong")])
    assert pinned.experiment == "rlbench-breakout+pong"
    assert sweep_tracking([_conf("mine"), _conf("other")]).experiment == "mine+other"


@pytest.mark.parametrize(
    ("preset", "jobs", "name"),
    [
        (None, [["actors=2", "tracking.uri=x"], ["actors=4", "tracking.uri=x"]], "sweep actors=2,4"),
        ("actor_sweep", [[f"actors={a}"] for a in (4, 8, 16, 32, 256)], "actor_sweep actors=4..256"),
        (None, [["seed=1"]], "sweep"),
    ],
)
def test_sweep_names_say_what_varies_and_fit_the_runs_table(preset, jobs, name):
    assert sweep_name(preset, jobs) == name
    assert len(sweep_name(None, [[f"k{i}=a", f"k{i}b=x"] for i in range(20)] + [["k0=b"]])) <= 48


def test_a_derived_values_reason_brings_the_reasons_it_points_at():
    from rlbench.tracking.unmeasured import explain

    reasons = {
        "energy_per_task_j": "no measured power (see the GPU and CPU reasons)",
        "energy_gpu_j": "no NVML",
        "energy_cpu_j": "no RAPL",
        "gpu_busy_frac": "no CUDA device",
    }
    assert explain("energy_per_task_j", reasons) == (
        "no measured power (see the GPU and CPU reasons); energy_cpu_j: no RAPL; energy_gpu_j: no NVML"
    )
    assert explain("gpu_busy_frac", reasons) == "no CUDA device"
    assert explain("fps", reasons) is None  # measured: nothing to explain


def test_a_jobs_note_says_where_its_timeline_opens_when_it_wrote_one():
    from rlbench.tracking.job_note import job_note

    final = {"frames": 1000.0, "learner_updates": 2.0, "runtime_s": 10.0, "fps": 200.0}
    assert "ui.perfetto.dev" in job_note(final, "pong", {}, timeline=True)
    assert "telemetry/trace.json" in job_note(final, "pong", {}, timeline=True)
    assert "perfetto" not in job_note(final, "pong", {}).lower()  # telemetry off or trace_window_s=0: no file


def test_logging_a_dataset_another_writer_just_created_retries(monkeypatch):
    """Two search workers log the same new env dataset at once: the loser's insert hits the
    store's unique key (seen in CI: psycopg2 UniqueViolation on dataset_pk); the retry finds it."""
    import mlflow
    from mlflow.exceptions import MlflowException

    from rlbench.tracking import record

    calls = []

    def flaky(dataset, context):
        calls.append(context)
        if len(calls) == 1:
            raise MlflowException(
                "BAD_REQUEST: (psycopg2.errors.UniqueViolation) duplicate key value violates "
                'unique constraint "dataset_pk"'
            )

    monkeypatch.setattr(mlflow, "log_input", flaky)
    monkeypatch.setattr(record.time, "sleep", lambda s: None)
    record.log_input(object())
    assert calls == ["environment", "environment"]

    def broken(dataset, context):
        raise MlflowException("RESOURCE_DOES_NOT_EXIST: run not found")

    monkeypatch.setattr(mlflow, "log_input", broken)
    with pytest.raises(MlflowException, match="run not found"):  # anything else is not retried
        record.log_input(object())


def test_a_parent_tag_another_writer_just_created_is_written_again(monkeypatch):
    """Two search workers close one study together and both write its description: the
    server inserted the tag twice and the loser failed on tag_pk (CI: PostgreSQL
    UniqueViolation, the worker exited 1). The second write updates the row; other errors raise."""
    from mlflow.exceptions import MlflowException

    from rlbench.tracking.parent import NOTE_TAG, ParentRun

    parent, calls = ParentRun("p" * 32, "1", "study"), []

    def set_tag(run_id, key, value):
        calls.append(key)
        if len(calls) == 1:
            raise MlflowException(
                'BAD_REQUEST: (psycopg.errors.UniqueViolation) duplicate key value violates unique constraint "tag_pk"'
            )

    monkeypatch.setattr(parent._client, "set_tag", set_tag)
    parent.describe("the note")
    assert calls == [NOTE_TAG, NOTE_TAG]

    def broken(run_id, key, value):
        raise MlflowException("RESOURCE_DOES_NOT_EXIST: run not found")

    monkeypatch.setattr(parent._client, "set_tag", broken)
    with pytest.raises(MlflowException, match="run not found"):
        parent.set_tags({"a": "b"})


def test_the_runs_table_view_shows_the_knobs_and_headline_numbers_and_says_what_was_not_measured():
    from rlbench.tracking.views import view_state

    state = view_state("tags.mlflow.parentRunId = 'p'", ["actors", "sm_limit"], {"runtime_s", "task_fps", "fps"})
    assert (
        state["selectedColumns"]
        == state["columnOrder"]
        == [
            "params.`actors`",
            "params.`sm_limit`",
            "metrics.`runtime_s`",
            "metrics.`task_fps`",
            "metrics.`fps`",
            "tags.`energy_per_task_j`",
            "tags.`bound`",
        ]
    )  # energy: the jobs' "not measured: why" tag
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`runtime_s`", True)
    bars, parallel = state["compareRunCharts"][:3], state["compareRunCharts"][3]
    assert [(c["type"], c["metricKey"]) for c in bars] == [("BAR", "runtime_s"), ("BAR", "task_fps"), ("BAR", "fps")]
    assert parallel["selectedParams"] == ["actors", "sm_limit"] and parallel["selectedMetrics"][-1] == "runtime_s"
    assert state["isAccordionReordered"] and state["compareRunSections"][0]["uuid"] == bars[0]["metricSectionId"]
    measured = view_state("f", [], {"runtime_s", "task_fps", "fps", "energy_per_task_j"})
    assert "metrics.`energy_per_task_j`" in measured["selectedColumns"]
    assert [c["type"] for c in measured["compareRunCharts"]] == ["BAR"] * 4  # no knobs: no parallel coordinates
    assert not {"groupBy", "groupsExpanded", "useGroupedValuesInCharts"} & state.keys()  # no repeats: ungrouped


def test_with_repeats_the_runs_table_view_groups_the_runs_by_configuration():
    """MLflow 3.17's "Group by" in a shared view (its ExperimentPageUIState `groupBy`, a
    RunsGroupByConfig): a row per `repeat_group` with its runs' average, the runs open below it,
    the charts drawing the groups; the rest of the view as without repeats."""
    from rlbench.tracking.views import view_state

    plain = view_state("f", ["actors"], {"runtime_s", "task_fps", "fps"})
    state = view_state("f", ["actors"], {"runtime_s", "task_fps", "fps"}, group_by_tag="repeat_group")
    assert state["groupBy"] == {
        "aggregateFunction": "average",
        "groupByKeys": [{"mode": "tag", "groupByData": "repeat_group"}],
    }
    assert state["groupsExpanded"] == {} and state["useGroupedValuesInCharts"] is False  # each run: no average
    widths = {f"metrics.`{m}`": 175 for m in ("runtime_s", "task_fps", "fps")}  # `<median> (median of 3)`
    assert state["columnWidths"] == plain["columnWidths"] | widths
    assert {
        k: v
        for k, v in state.items()
        if k not in ("groupBy", "groupsExpanded", "useGroupedValuesInCharts", "columnWidths")
    } == {k: v for k, v in plain.items() if k != "columnWidths"}


def test_a_sweeps_view_shows_its_jobs_verdicts_as_the_first_tag_column_grouped_or_not():
    """A sweep's view (rlbench/sweeps/sweep.py sweep_view) adds the tag `verdict` (best, not
    told apart from best, slower) first of the tag columns (MLflow shows params, metrics, then
    tags: the first tag column is in sight at 1400 px), wide enough for its sentence."""
    from rlbench.tracking.views import view_state

    for group in (None, "repeat_group"):
        state = view_state("f", ["actors"], {"runtime_s", "task_fps", "fps"}, group_by_tag=group, tags=("verdict",))
        assert (
            state["selectedColumns"]
            == state["columnOrder"]
            == [
                "params.`actors`",
                "metrics.`runtime_s`",
                "metrics.`task_fps`",
                "metrics.`fps`",
                "tags.`verdict`",
                "tags.`energy_per_task_j`",
                "tags.`bound`",
            ]
        )
        assert state["columnWidths"]["tags.`verdict`"] == 300


def test_knobs_are_the_swept_overrides_as_param_names():
    from rlbench.tracking.views import knobs_of, view_link

    params = {"actors", "sm_limit", "algo.name", "env.id", "seed"}
    jobs = [
        ["actors=4", "algo=r2d2", "env=pong", "tracking.uri=x", "seed=1"],
        ["actors=40", "algo=vtrace", "env=pong", "tracking.uri=y", "seed=1"],
    ]
    assert knobs_of(jobs, params) == ["actors", "algo.name"]  # env and seed do not vary; tracking is no knob
    assert knobs_of(jobs[:1], params, varying=False) == ["actors", "algo.name", "env.id", "seed"]
    assert view_link("7", "rlbench-p", chart=True) == (
        "#/experiments/7/runs?viewStateShareKey=rlbench-p&workflowType=machine_learning&compareRunsMode=CHART"
    )
    assert view_link("7", None) == "#/experiments/7/runs?workflowType=machine_learning"


def test_a_headline_metric_not_measured_says_why_with_its_sources_first():
    from rlbench.tracking.views import not_measured

    reasons = {"energy_per_task_j": "no measured power", "energy_gpu_j": "no GPU (NVML)", "energy_cpu_j": "no RAPL"}
    assert not_measured("energy_per_task_j", reasons) == (
        "not measured: energy_cpu_j: no RAPL; energy_gpu_j: no GPU (NVML); no measured power"
    )
    assert not_measured("fps", {}) == "not measured: no value recorded"


def test_mlflows_info_lines_go_to_the_jobs_log_file_not_the_terminal(tmp_path):
    import io
    import logging

    from rlbench.tracking.store import mlflow_info_to_log_file

    mlflow_log, root = logging.getLogger("mlflow"), logging.getLogger()
    terminal, log_file = io.StringIO(), logging.FileHandler(tmp_path / "job.log")
    console = logging.StreamHandler(terminal)
    saved = (list(mlflow_log.handlers), [h.level for h in mlflow_log.handlers])
    mlflow_log.handlers[:] = [console]  # MLflow's own stream handler, as it configures itself
    root.addHandler(log_file)  # Hydra's job log
    try:
        mlflow_info_to_log_file()
        mlflow_info_to_log_file()  # twice: the file is not added twice
        logging.getLogger("mlflow.store.db.utils").info("Creating initial MLflow database tables...")
        logging.getLogger("mlflow.tracking").warning("a warning still shows")
        log_file.flush()
    finally:
        root.removeHandler(log_file)
        mlflow_log.handlers[:] = saved[0]
        for handler, level in zip(*saved, strict=True):
            handler.setLevel(level)
        log_file.close()
    assert terminal.getvalue() == "a warning still shows\n"
    assert (tmp_path / "job.log").read_text().splitlines() == [
        "Creating initial MLflow database tables...",
        "a warning still shows",
    ]


def test_a_parents_metrics_are_rounded_as_a_jobs(store):
    """best/* and best_<objective> read as the jobs' values do: 6 significant digits."""
    import mlflow

    from rlbench.tracking.parent import ParentRun

    client = mlflow.MlflowClient(store["uri"])
    mlflow.set_tracking_uri(store["uri"])
    run = client.create_run(client.create_experiment("p")).info.run_id
    ParentRun(run, "0", "study").log_metrics({"best_runtime_s": 1.3946178919977683})
    assert client.get_run(run).data.metrics == {"best_runtime_s": 1.39462}
