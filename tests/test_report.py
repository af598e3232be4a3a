"""rlbench report: figures whose plotted values are the MLflow metrics, failed and missing jobs
shown as such, the CLI, and the analysis notebook, on synthetic runs and on a tiny real sweep."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import mlflow
import pytest

import rlbench
from rlbench.cli.report import main as report_main
from rlbench.report import build_report, findings, load_parent
from rlbench.report import figures as F
from rlbench.tracking.study_records import JobRun, Study
from tests.conftest import CARTPOLE_TINY, ROOT

HOST = {"host": "dgx", "cpu_model": "Xeon", "hardware_threads": "40", "gpu_name": "Tesla V100", "gpu_sm_count": "80"}


def _child(client, exp, parent, name, params, metrics, status="FINISHED", tags=None):
    run = client.create_run(
        exp, run_name=name, tags={"mlflow.parentRunId": parent, "compute_unit": "sm", **HOST, **(tags or {})}
    )
    for k, v in params.items():
        client.log_param(run.info.run_id, k, v)
    for k, v in metrics.items():
        client.log_metric(run.info.run_id, k, v)
    client.set_terminated(run.info.run_id, status)
    return run.info.run_id


def _metrics(fps, runtime, watts, sm, env=0.3, inf=0.6):
    return {
        "fps": fps,
        "runtime_s": runtime,
        "frames": fps * runtime,
        "power_gpu_w_avg": watts,
        "energy_per_task_j": watts * runtime,
        "energy_gpu_j": watts * runtime,
        "perf_per_watt": fps / watts,
        "gpu_busy_frac": 0.2,
        "gpu_util_avg": 0.6,
        "sm_granted": sm,
        "sm_total": 80.0,
        "op_frac/actors/env_step": env,
        "op_frac/actors/inference": inf,
        "op_frac/actors/rate_limited": 0.05,
        "op_frac/actors/other": 1 - env - inf - 0.05,
        "op_frac/learner/wait": 0.4,
        "op_frac/learner/forward_backward": 0.6,
    }


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory, empty_store_db):
    """A DGX-1-like actor sweep plus an SM point, one FAILED job and one planned job with no run,
    logged once per module (~40 MLflow writes, ~1.5 s) into a store the tests get a copy of."""
    folder = tmp_path_factory.mktemp("synthetic")
    shutil.copyfile(empty_store_db, folder / "mlflow.db")
    client = mlflow.MlflowClient(f"sqlite:///{folder}/mlflow.db")
    exp = client.create_experiment("test", artifact_location=str(folder / "artifacts"))
    parent = client.create_run(exp, run_name="actor sweep", tags={"rlbench.role": "sweep", **HOST}).info.run_id
    client.log_param(parent, "jobs", 6)
    ids = {}
    for actors, sm_limit, sm, fps, runtime, watts in [
        (4, "None", 80, 1000.0, 600.0, 70.0),
        (40, "None", 80, 5800.0, 110.0, 150.0),
        (256, "None", 80, 6000.0, 104.0, 160.0),
        (40, "40", 40, 5500.0, 117.0, 140.0),
    ]:
        name = f"actors={actors} sm_limit={sm_limit}"
        ids[name] = _child(
            client,
            exp,
            parent,
            name,
            {"actors": actors, "sm_limit": sm_limit, "env.frameskip": 4, "cpu_gpu_ratio": 40 / sm},
            _metrics(fps, runtime, watts, sm) | {"cpu_gpu_ratio": 40 / sm},
        )
    ids["failed"] = _child(
        client,
        exp,
        parent,
        "actors=64 sm_limit=None",
        {"actors": 64, "sm_limit": "None"},
        {},
        status="FAILED",
        tags={"error": "RuntimeError: boom"},
    )
    rows = [[i, f"actors={a}", "FINISHED", ids.get(f"actors={a} sm_limit=None")] for i, a in enumerate((4, 40, 256))]
    rows += [[3, "actors=64", "FAILED", ids["failed"]], [4, "actors=128", "KILLED", None]]
    client.log_dict(parent, {"columns": ["job", "overrides", "status", "run_id"], "data": rows}, "summary.json")
    client.set_terminated(parent, "FAILED")
    return folder / "mlflow.db", parent, ids


@pytest.fixture
def synthetic(store, synthetic_store):
    """The synthetic sweep in this test's own store (a copy: a test may add runs), set as the tracking URI."""
    db, parent, ids = synthetic_store
    shutil.copyfile(db, store["db"])
    mlflow.set_tracking_uri(store["uri"])
    return parent, ids


def _lines(drawn, prefix):
    return {
        ln.get_gid(): (list(ln.get_xdata()), list(ln.get_ydata()))
        for ax in drawn.fig.axes
        for ln in ax.lines
        if (ln.get_gid() or "").startswith(prefix)
    }


def test_figure3_plots_the_recorded_metrics_and_leaves_out_the_failed_job(synthetic):
    parent, _ = synthetic
    study = load_parent(parent)
    fig3 = F.actor_scaling(study)
    runtime = _lines(fig3, "runtime_s|")["runtime_s|sm_limit=None"]
    assert runtime == ([4.0, 40.0, 256.0], pytest.approx([1.0, 110 / 600, 104 / 600]))
    power = _lines(fig3, "power_gpu_w_avg|")["power_gpu_w_avg|sm_limit=None"]
    assert power[1] == [70.0, 150.0, 160.0]
    energy = _lines(fig3, "energy_per_task_j|")["energy_per_task_j|sm_limit=None"]
    assert energy[1] == pytest.approx([70 * 600.0, 150 * 110.0, 160 * 104.0])
    assert all(64.0 not in x for x, _ in _lines(fig3, "").values())
    footer = " ".join(t.get_text() for t in fig3.fig.texts)
    assert "actors=64 sm_limit=None: FAILED (RuntimeError: boom)" in footer and "actors=128" in footer
    assert "Tesla V100 (80 SMs)" in footer and "40 HW threads" in footer
    assert "frameskip 4" in next(ax for ax in fig3.fig.axes if ax.get_ylabel().startswith("perf per watt")).get_ylabel()
    # No job measured CPU energy: its series is left out, and the foot says so once, not a zero.
    assert "Not measured in any job: task_fps, power_cpu_w_avg, energy_cpu_j (not logged)" in " ".join(footer.split())
    assert not _lines(fig3, "energy_cpu_j|") and not _lines(fig3, "power_cpu_w_avg|")
    # The SM point (sm_limit=40, one actor count) is its own baseline: not a line, named at the foot.
    assert not [g for g in _lines(fig3, "") if g.endswith("sm_limit=40")]
    assert "not drawn, at one actor count only: sm_limit=40" in footer
    # A panel's second series is dashed with other markers: lying on the first, both stay in sight.
    styles = {
        gid.split("|")[0]: (ln.get_linestyle(), ln.get_marker())
        for ax in fig3.fig.axes
        for ln in ax.lines
        if (gid := ln.get_gid() or "").startswith(("energy_per_task_j|", "energy_gpu_j|"))
    }
    assert styles == {"energy_per_task_j": ("-", "o"), "energy_gpu_j": ("--", "x")}


def test_figure4_slowdown_against_the_most_units(synthetic):
    study = load_parent(synthetic[0])
    fig4 = F.sm_scaling(study)
    curves = _lines(fig4, "slowdown")
    assert curves["slowdown_vs_sm_granted|actors=40"] == ([40.0, 80.0], pytest.approx([117 / 110, 1.0]))
    assert curves["slowdown_vs_cpu_gpu_ratio|actors=40"] == ([0.5, 1.0], pytest.approx([1.0, 117 / 110]))
    assert set(curves) == {"slowdown_vs_sm_granted|actors=40", "slowdown_vs_cpu_gpu_ratio|actors=40"}
    footer = " ".join(t.get_text() for t in fig4.fig.texts)  # actors 4 and 256 ran with all units only
    assert "not drawn, at one unit count only: actors=4; actors=256" in footer


def test_a_study_is_built_from_the_tracking_ports_plain_records():
    """No store: the records a reader returns (rlbench/tracking/readers.py) make the report's Study."""
    from rlbench.tracking.readers import RunRecord, SweepRecord
    from rlbench.tracking.study_records import study_of

    parent = RunRecord(
        "p", "actor sweep", "7", "FAILED", params={"jobs": "4"}, tags={"rlbench.role": "sweep", "host": "h"}
    )
    kids = [
        RunRecord(
            "a" * 32,
            "actors=4",
            "7",
            "FINISHED",
            params={"actors": "4"},
            metrics={"fps": 10.0},
            tags={"gpu_name": "V100", "unmeasured": "energy_per_task_j: no RAPL", "mlflow.parentRunId": "p"},
        ),
        RunRecord("b" * 32, "", "7", "FAILED", params={"actors": "2"}, tags={"error": "RuntimeError: boom"}),
    ]
    summary = [
        {"job": 0, "overrides": "actors=4", "status": "FINISHED", "run_id": "a" * 32},
        {"job": 2, "overrides": "actors=8", "status": "KILLED", "run_id": None},
    ]
    study = study_of(SweepRecord(parent, kids, summary))
    assert (study.kind, study.title, study.parent_id) == ("sweep", "actor sweep", "p")
    assert [j.name for j in study.jobs] == ["b" * 8, "actors=4"]  # by actors; a run without a name: its id
    assert study.host == {"host": "h", "gpu_name": "V100"}  # the GPU's tags come from a finished job
    assert study.jobs[0].error == "RuntimeError: boom" and study.jobs[1].why_missing("energy_per_task_j") == "no RAPL"
    assert "mlflow.parentRunId" not in study.jobs[1].tags
    assert study.missing == [
        "job 2 [actors=8]: KILLED, no run in this sweep",
        "1 of 4 planned jobs never started (no run, no summary row)",
    ]


def test_verdict_and_html_report_failed_and_missing_jobs(synthetic, tmp_path):
    study = load_parent(synthetic[0])
    found = findings(study)
    (k,) = found["knee"].values()
    assert k["actors"] == 40 and "this host has 40 HW threads" in k["text"]
    assert found["bottleneck"]["actors=4 sm_limit=None"]["kind"] == "inference"
    assert [d["status"] for d in found["not_finished"]] == ["FAILED"]
    assert any("actors=128" in m and "KILLED" in m for m in found["missing"])
    out = build_report(study, tmp_path / "report")
    page = out["html"].read_text()
    assert 'title="RuntimeError: boom">FAILED<' in page and "MISSING: job 4 [actors=128]" in page
    assert not re.search(r'(src|href)="(http|//)', page) and page.count("data:image/png;base64,") == 4
    assert set(out["figures"]) == {"fig3_actor_scaling", "fig4_sm_scaling", "operations", "gpu_busy"}
    ops = F.operations(study)
    widths = [p.get_width() for p in ops.fig.axes[0].patches if p.get_gid() == "op_frac/actors/env_step"]
    assert widths == pytest.approx([0.3] * 4)


def test_search_pareto_front(store, tmp_path):
    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    exp = client.create_experiment("test")
    parent = client.create_run(
        exp, run_name="study ratio", tags={"rlbench.role": "study", "optuna_study": "ratio", **HOST}
    ).info.run_id
    for i, (fps, energy) in enumerate([(100.0, 50.0), (90.0, 40.0), (80.0, 45.0)]):
        _child(
            client,
            exp,
            parent,
            f"trial {i}",
            {"actors": 4 * (i + 1)},
            {"fps": fps, "energy_per_task_j": energy, "cpu_gpu_ratio": 1.0},
        )
    drawn = F.pareto_front(load_parent(parent))
    (front,) = _lines(drawn, "pareto").values()
    assert front == ([90.0, 100.0], [40.0, 50.0])
    # The CLI finds the search's parent by its study name and logs the front on it.
    assert report_main(["--study", "ratio", "--tracking-uri", store["uri"], "--out", str(tmp_path / "r")]) == 0
    assert "report/pareto_front.png" in {a.path for a in client.list_artifacts(parent, "report")}


def test_experiment_report_gets_its_own_run(synthetic, store, tmp_path, capsys):
    assert report_main(["--experiment", "test", "--tracking-uri", store["uri"], "--out", str(tmp_path / "r")]) == 0
    assert "experiment test (4/5 jobs finished)" in capsys.readouterr().out  # the parent is not a job
    found = mlflow.search_runs(
        experiment_names=["test"], output_format="list", filter_string="tags.`rlbench.role` = 'report'"
    )
    assert len(found) == 1 and found[0].info.status == "FINISHED"
    assert "report/report.html" in {
        a.path for a in mlflow.MlflowClient().list_artifacts(found[0].info.run_id, "report")
    }
    assert report_main(["--experiment", "nope", "--tracking-uri", store["uri"], "--no-log"]) == 2


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    """A real 2x2 sweep (actors x sm_limit) of seconds-long CartPole jobs."""
    tmp = tmp_path_factory.mktemp("sweep")
    uri = f"sqlite:///{tmp}/mlflow.db"
    swept = rlbench.sweep(
        [
            "actors=2,4",
            "sm_limit=1,2",
            *CARTPOLE_TINY,
            "progress=log",
            "eval_envs=0",
            "telemetry.rate_hz=2",
            f"tracking.uri={uri}",
            f"tracking.artifact_location={tmp}/artifacts",
            "tracking.experiment=test",
            "tracking.system_metrics=false",
            f"hydra.sweep.dir={tmp}/multirun",
        ]
    )
    assert swept.status == "FINISHED", swept.rows
    parent = swept.parent_run_id
    return uri, parent, tmp


@pytest.mark.e2e
def test_report_cli_on_a_real_sweep_logs_figures_whose_values_are_the_metrics(tiny_sweep):
    uri, parent, tmp = tiny_sweep
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbench.report",
            "--sweep",
            parent,
            "--tracking-uri",
            uri,
            "--out",
            str(tmp / "report"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    from rlbench.core.verdict import NO_GPU_RATIO

    # on CUDA a recommended ratio, on the CPU one sentence saying ratios need a GPU
    assert ("recommended: CPU/GPU ratio" in out.stdout) != (NO_GPU_RATIO in out.stdout)
    assert "gpu_busy not drawn: not measured" in out.stdout
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient()
    logged = {a.path for a in client.list_artifacts(parent, "report")}
    assert {
        "report/report.html",
        "report/fig3_actor_scaling.png",
        "report/fig4_sm_scaling.png",
        "report/operations.png",
        "report/findings.json",
    } <= logged
    # The plotted values against the runs as MLflow returns them, read independently.
    kids = {
        r.info.run_name: r
        for r in mlflow.search_runs(experiment_names=["test"], output_format="list")
        if r.data.tags.get("mlflow.parentRunId") == parent
    }
    assert len(kids) == 4 and all(r.info.status == "FINISHED" for r in kids.values())
    study = load_parent(parent)
    for gid, (xs, ys) in _lines(F.actor_scaling(study), "runtime_s|").items():
        sm = gid.split("sm_limit=")[1]
        rt = [kids[f"actors={a} sm_limit={sm}"].data.metrics["runtime_s"] for a in (2, 4)]
        assert (xs, ys) == ([2.0, 4.0], pytest.approx([1.0, rt[1] / rt[0]]))
    for gid, (xs, ys) in _lines(F.sm_scaling(study), "slowdown_vs_sm_granted|").items():
        a = gid.split("actors=")[1]
        rt = [kids[f"actors={a} sm_limit={s}"].data.metrics["runtime_s"] for s in (1, 2)]
        assert (xs, ys) == ([1.0, 2.0], pytest.approx([rt[0] / rt[1], 1.0]))
    ops = F.operations(study)
    for p in ops.fig.axes[0].patches:
        if p.get_gid() == "op_frac/actors/inference":
            name = ops.fig.axes[0].get_yticklabels()[round(p.get_y() + p.get_height() / 2)].get_text()
            assert p.get_width() == pytest.approx(kids[name].data.metrics["op_frac/actors/inference"])
    found = json.loads((tmp / "report" / "findings.json").read_text())
    assert set(found["bottleneck"]) == set(kids) and found["not_finished"] == [] and found["missing"] == []


@pytest.mark.e2e
def test_report_cli_refuses_a_job_run_and_an_unknown_id(tiny_sweep, capsys):
    """The report's main() in this process: the process's own exit status is the run above's."""
    uri, parent, _ = tiny_sweep
    mlflow.set_tracking_uri(uri)
    job = next(
        r
        for r in mlflow.search_runs(experiment_names=["test"], output_format="list")
        if r.data.tags.get("mlflow.parentRunId") == parent
    )
    for run_id, says in ((job.info.run_id, "has no child runs"), ("0" * 32, "no such run")):
        code = report_main(["--sweep", run_id, "--tracking-uri", uri, "--no-log", "--out", "/tmp/never"])
        err = capsys.readouterr().err
        assert code == 2 and says in err, err[-2000:]


def test_report_of_a_server_that_is_down_says_so_at_once(capsys):
    from tests.servers import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert report_main(["--sweep", "0" * 32, "--tracking-uri", url, "--no-log"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlbench.report: --tracking-uri={url}: MLflow tracking server not reachable: GET /health")


@pytest.mark.e2e
def test_analysis_notebook_executes_on_the_sweep(tiny_sweep, monkeypatch):
    import nbclient
    import nbformat

    uri, parent, _ = tiny_sweep
    monkeypatch.setenv("RLBENCH_TRACKING_URI", uri)
    monkeypatch.setenv("RLBENCH_SWEEP", parent)
    nb = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    ).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert parent in text and "4 of 4 jobs finished" in text
    from rlbench.core.verdict import NO_GPU_RATIO

    assert ("recommended: CPU/GPU ratio" in text) != (NO_GPU_RATIO in text)  # the one no-GPU sentence on CPU
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 3  # figures 3 and 4 and the operations; GPU busy is not measured here


@pytest.mark.e2e
def test_validate_prints_the_error_recomputed_from_the_records_and_the_report_draws_it(tiny_sweep, capsys):
    """A tiny profile of this host, then `rlbench.predict --validate` on the real sweep: the
    printed prediction_error is the one recomputed here from the runs' metrics and predictions
    made independently; the parent records it and the report draws predicted vs measured."""
    import statistics

    from rlbench.cli.predict import main as predict_main
    from rlbench.cli.profile import main as profile_main
    from rlbench.predict.accuracy import job_conf
    from rlbench.predict.curves import load_profile
    from rlbench.predict.jobs import Machine, predict_job

    uri, parent, tmp = tiny_sweep
    assert predict_main(["--validate", "--sweep", parent, "--tracking-uri", uri, "--no-log"]) == 2
    assert "no profile of host" in capsys.readouterr().err  # none yet: says how to make one
    assert (
        profile_main(
            [
                "--threads",
                "1",
                "--envs",
                "2,4",
                "--batches",
                "2,4",
                "--units",
                "1,2",
                "--seconds",
                "0.2",
                "--repeats",
                "3",
                "--updates",
                "1",
                "--corun-envs",
                "4",
                "--tracking-uri",
                uri,
                *CARTPOLE_TINY,
                "eval_envs=0",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert predict_main(["--validate", "--sweep", parent, "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    printed = float(re.search(r"^prediction_error=([0-9.]+)$", out.strip().splitlines()[-1]).group(1))
    mlflow.set_tracking_uri(uri)
    (profile_id,) = [
        r.info.run_id for r in mlflow.search_runs(experiment_names=["rlbench-profiles"], output_format="list")
    ]
    machine = Machine(load_profile(profile_id), load_profile(profile_id))
    kids = [
        r
        for r in mlflow.search_runs(experiment_names=["test"], output_format="list")
        if r.data.tags.get("mlflow.parentRunId") == parent
    ]
    errors = {k: [] for k in ("fps", "runtime_s")}
    for r in kids:
        p = predict_job(job_conf(r.data.tags), machine)
        for k, found in errors.items():
            found.append(abs(getattr(p, k) - r.data.metrics[k]) / r.data.metrics[k])
    assert len(errors["fps"]) == 4
    assert printed == pytest.approx(max(statistics.median(v) for v in errors.values()), abs=6e-5)
    assert mlflow.get_run(parent).data.metrics["prediction_error"] == pytest.approx(printed, abs=6e-5)
    result = build_report(load_parent(parent), tmp / "report-predicted")
    assert "predicted_vs_measured" in result["figures"]
    assert any(ln.startswith("model: prediction_error=") and profile_id[:8] in ln for ln in result["lines"])


def test_on_off_policy_figure_and_verdict_from_the_record(store):
    mlflow.set_tracking_uri(store["uri"])
    client = mlflow.MlflowClient()
    exp = client.create_experiment("onoff", artifact_location=str(store["db"].parent / "artifacts"))
    parent = client.create_run(exp, run_name="onoff", tags={"rlbench.role": "sweep", **HOST}).info.run_id
    for algo, sim, learn in (("r2d2", 0.15, 0.9), ("vtrace", 0.6, 0.35)):
        _child(
            client,
            exp,
            parent,
            f"algo={algo}",
            {"algo.name": algo, "actors": 40},
            {"fps": 1000.0, "runtime_s": 10.0, "sim_share": sim, "learner_share": learn},
        )
    client.set_terminated(parent, "FINISHED")
    study = load_parent(parent)
    drawn = F.on_off_policy(study)
    bars = {p.get_gid(): [] for ax in drawn.fig.axes for p in ax.patches}
    for p in drawn.fig.axes[0].patches:
        bars[p.get_gid()].append(p.get_height())
    assert bars == {"sim_share": [0.6, 0.15], "learner_share": [0.35, 0.9]}  # vtrace first, then r2d2
    assert "4.00x (RL-Scope: >= 3.5x)" in drawn.fig.axes[0].get_title()
    lines = build_report(study, store["db"].parent / "report")["lines"]
    assert any(ln.startswith("on- vs off-policy: vtrace (on-policy) spent 60% of its task stepping") for ln in lines)
    assert findings(study)["on_off_policy"]["ratio"] == pytest.approx(4.0)


# --- figures a reader can read: reasons wrapped whole inside the figure, one colour per op ---

REASON_300 = (
    "the NVML library could not be loaded on this host because no NVIDIA driver is installed here, "
    "so neither the board power nor the total-energy counter of any GPU could be read at any point "
    "of the task; the CPU package energy has no RAPL counter either in this virtual machine, and "
    "no TDP was configured"
)


def _study(jobs_metrics: list[dict], nulls: dict[str, str]) -> Study:
    """A finished sweep over actors without MLflow: one JobRun per metrics dict (`actors` among them)."""
    jobs = [
        JobRun(f"id{i}", f"actors={m['actors']:.0f}", "FINISHED", {"actors": str(int(m["actors"]))}, m, nulls)
        for i, m in enumerate(jobs_metrics)
    ]
    return Study("sweep", "wrapping test", "p", HOST, jobs, [])


def _outside(fig, artists) -> list[str]:
    """The texts of `artists` whose drawn extent reaches outside the figure (should be none)."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    w, h = fig.bbox.width, fig.bbox.height
    out = []
    for a in artists:
        e = a.get_window_extent(renderer)
        if e.x0 < 0 or e.y0 < 0 or e.x1 > w or e.y1 > h:
            out.append(a.get_text()[:40])
    return out


def _texts(fig) -> list:
    """Every visible, non-empty text of `fig` (titles, labels, tick labels, legends, notes)."""
    from matplotlib.text import Text

    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]


def test_a_300_character_reason_is_said_once_whole_and_inside_the_figure():
    assert len(REASON_300) >= 300
    nulls = dict.fromkeys(("power_gpu_w_avg", "power_cpu_w_avg", "energy_gpu_j", "energy_cpu_j"), REASON_300)
    study = _study(
        [
            {"actors": a, "runtime_s": 10.0 / a, "perf_per_watt": a, "energy_per_task_j": 9.0 - a}
            for a in (2.0, 4.0, 8.0)
        ],
        nulls,
    )
    drawn = F.actor_scaling(study)
    foot = " ".join(" ".join(t.get_text() for t in drawn.fig.texts).split())
    assert foot.count(REASON_300) == 1 and drawn.note.count(REASON_300) == 1  # whole, once for four metrics
    assert "power_gpu_w_avg, power_cpu_w_avg, energy_gpu_j, energy_cpu_j (" + REASON_300 in foot
    assert not any(REASON_300 in line for t in drawn.fig.texts for line in t.get_text().splitlines())  # wrapped
    assert _outside(drawn.fig, _texts(drawn.fig)) == []  # titles, footer, labels, ticks and legends too


def test_panels_no_job_measured_collapse_to_one_line_naming_them_and_why():
    fig = F.actor_scaling(
        _study([{"actors": a, "runtime_s": 1.0 / a, "fps": 10 * a, "task_fps": 8 * a} for a in (1.0, 2.0)], NO_GPU)
    )
    assert [ax.get_ylabel().split(" (")[0] for ax in fig.fig.axes] == ["runtime / runtime at fewest actors", "fps"]
    assert all(ax.lines for ax in fig.fig.axes)  # no empty box
    assert fig.note == (
        "Not measured in any job: power_gpu_w_avg, energy_gpu_j (NVML: no GPU); "
        "power_cpu_w_avg (not logged); perf_per_watt, energy_per_task_j (no measured power); "
        "energy_cpu_j (RAPL: no readable counters)"
    )
    assert fig.note in " ".join(" ".join(t.get_text() for t in fig.fig.texts).split())
    assert _outside(fig.fig, _texts(fig.fig)) == []


def test_figure3_draws_the_actors_fps_beside_the_tasks_fps():
    study = _study(
        [
            {"actors": a, "runtime_s": 100.0 / min(a, 4), "fps": 1000.0 * a, "task_fps": 250.0 * min(a, 4)}
            for a in (2.0, 4.0, 8.0)
        ],
        {},
    )
    drawn = F.actor_scaling(study)
    (ax,) = [ax for ax in drawn.fig.axes if ax.get_ylabel().startswith("fps (env frames/s")]
    got = {ln.get_gid(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.lines}
    assert got == {
        "fps|all jobs": ([2.0, 4.0, 8.0], [2000.0, 4000.0, 8000.0]),
        "task_fps|all jobs": ([2.0, 4.0, 8.0], [500.0, 1000.0, 1000.0]),
    }
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["actors' fps", "task's fps (frames / runtime_s)"]


def test_figure3_says_what_the_task_is():
    drawn = F.actor_scaling(_study([{"actors": a, "runtime_s": 1.0 / a} for a in (1.0, 2.0)], {}))
    title = " ".join(drawn.fig.texts[0].get_text().split())
    assert "task = the same frame target and learner updates" in title and "same frames" not in title
    assert "the actors may step past the target until the last update has its unrolls" in title


def test_long_titles_and_footers_wrap_inside_the_figure():
    study = _study([{"actors": a, "runtime_s": 1.0 / a} for a in (1.0, 2.0)], {})
    study.title = "a sweep whose name is long " * 8
    study.missing = [f"job {i} [actors={i}]: KILLED, no run in this sweep" for i in range(12)]
    fig = F.actor_scaling(study).fig
    assert _outside(fig, _texts(fig)) == []
    assert "job 11 [actors=11]: KILLED" in " ".join(" ".join(t.get_text() for t in fig.texts).split())


def test_operations_use_op_colour_everywhere_and_one_legend_names_each_op_once(synthetic):
    from matplotlib.colors import to_hex

    from rlbench.telemetry.charts.colours import op_colour

    drawn = F.operations(load_parent(synthetic[0]))
    patches = [p for ax in drawn.fig.axes for p in ax.patches if (p.get_gid() or "").startswith("op_frac/")]
    assert {p.get_gid().split("/")[1] for p in patches} == {"actors", "learner"}
    assert all(to_hex(p.get_facecolor()) == op_colour(p.get_gid().split("/")[2]) for p in patches)
    assert all(ax.get_legend() is None for ax in drawn.fig.axes)
    (legend,) = drawn.fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["env_step", "inference", "rate_limited", "wait", "forward_backward", "other"]
    assert [to_hex(h.get_facecolor()) for h in legend.legend_handles] == [op_colour(op) for op in labels]
    assert _outside(drawn.fig, legend.get_texts()) == []


# --- the job table: columns no job measured collapse to one line; headers on three lines at most ---

NO_GPU = {
    "power_gpu_w_avg": "NVML: no GPU",
    "gpu_util_avg": "NVML: no GPU",
    "energy_gpu_j": "NVML: no GPU",
    "energy_cpu_j": "RAPL: no readable counters",
    "gpu_busy_frac": "no CUDA device",
    "energy_per_task_j": "no measured power",
    "perf_per_watt": "no measured power",
}


def test_columns_no_job_measured_collapse_to_one_line_naming_them_and_why():
    from rlbench.report.html import _jobs

    study = _study(
        [{"actors": a, "runtime_s": 1.0 / a, "fps": 10.0 * a, "eval_return_mean20": 9.0} for a in (2.0, 4.0)], NO_GPU
    )
    study.jobs[0].metrics["sim_share"] = 0.25  # measured by one job only: its column stays, n/a explained
    page = _jobs(study, {})
    heads = [re.sub("<[^>]+>", " ", h).split() for h in re.findall(r"<th[^>]*>(.*?)</th>", page)]
    assert [" ".join(h) for h in heads] == [
        "job",
        "status",
        "actors",
        "fps frames/s",
        "runtime s",
        "sim share",
        "eval return last 20",
        "bound",
    ]
    assert page.count(">n/a<") == 1 and "sim share (sim_share): not logged by this job" in page
    (line,) = [p for p in re.findall(r"<p>(.*?)</p>", page) if p.startswith("Not measured in any job")]
    assert line == (
        "Not measured in any job: actor_threads_used, sm_granted, cpu_gpu_ratio, learner_share (not logged); "
        "energy_per_task_j, perf_per_watt (no measured power); "
        "power_gpu_w_avg, gpu_util_avg, energy_gpu_j (NVML: no GPU); gpu_busy_frac (no CUDA device); "
        "energy_cpu_j (RAPL: no readable counters)"
    )


def test_table_headers_take_at_most_three_short_lines():
    from rlbench.report.html import COLUMNS, _head

    for name, unit, key in COLUMNS:
        lines = re.sub("<[^>]+>", "\n", _head(name, unit, key).replace("<br>", "\n")).split("\n")
        lines = [ln for ln in lines if ln.strip()]
        assert len(lines) <= 3 and max(map(len, lines)) <= 8, (key, lines)


def test_without_a_gpu_the_report_says_once_that_ratios_need_one():
    from rlbench.core.verdict import NO_GPU_RATIO
    from rlbench.report.findings import verdict_lines
    from rlbench.report.html import _jobs

    study = _study(
        [
            {
                "actors": a,
                "runtime_s": 1.0 / a,
                "fps": 10.0 * a,
                "cpu_gpu_ratio": 1.0,
                "sm_granted": 2.0,
                "sm_total": 2.0,
            }
            for a in (2.0, 4.0)
        ],
        {},
    )
    for j in study.jobs:
        j.tags["compute_unit"] = "cpu_thread"
    assert study.without_gpu
    lines = verdict_lines(findings(study))
    assert lines.count(NO_GPU_RATIO) == 1 and "GPU" in NO_GPU_RATIO
    assert [ln for ln in lines if "cpu/gpu ratio" in ln.lower() or "ratio 1" in ln] == [
        NO_GPU_RATIO
    ]  # no "every job ran at ratio 1", no rule
    assert "CPU/GPU" not in _jobs(study, {})  # nor a column of ratio 1
    for j in study.jobs:  # the same jobs on CUDA compare ratios
        j.tags["compute_unit"] = "sm"
    assert NO_GPU_RATIO not in verdict_lines(findings(study)) and "CPU/GPU" in _jobs(study, {})


def test_figure4_without_a_gpu_has_no_ratio_panel():
    study = _study(
        [{"actors": 4.0, "runtime_s": 10.0 / u, "sm_granted": u, "cpu_gpu_ratio": 1 / u} for u in (1.0, 2.0)], {}
    )
    for j in study.jobs:
        j.tags["compute_unit"] = "cpu_thread"
    drawn = F.sm_scaling(study)
    assert [ax.get_xlabel() for ax in drawn.fig.axes] == ["granted CPU intra-op threads"]


@pytest.mark.e2e
@pytest.mark.browser
def test_the_job_table_fits_a_1000_px_window_and_no_header_wraps_past_three_lines(tmp_path):
    """All 17 columns measured (a GPU host), long job names, a failed job with a long error and
    the longest bound: in a 1000 px window every column is on screen and headers take <= 3 lines."""
    from tests.conftest import _unavailable

    try:
        from tests.cdp import Browser, chromium_path
    except ImportError as e:
        _unavailable(f"{e} (pip install -e '.[test]')")
    if chromium_path() is None:
        _unavailable("no chromium here (Debian: apt-get install chromium)")
    from rlbench.report.findings import verdict_lines
    from rlbench.report.html import render

    study = _study(
        [
            _metrics(6000.0, 104.0, 160.0, 80.0, env=0.7, inf=0.2)
            | {
                "actors": a,
                "cpu_gpu_ratio": 0.5,
                "actor_threads_used": 40.0,
                "sim_share": 0.3,
                "learner_share": 0.5,
                "eval_return_mean20": -20.5,
                "task_fps": 4800.0,
            }
            for a in (4.0, 40.0, 256.0)
        ],
        {},
    )
    for j in study.jobs:
        j.name, j.tags["compute_unit"] = f"actors={j.actors} sm_limit=None", "sm"
    study.jobs.append(
        JobRun(
            "f",
            "actors=64 sm_limit=None",
            "FAILED",
            {"actors": "64"},
            {},
            {},
            {"error": "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB " * 3},
        )
    )
    found = findings(study)
    assert {b["kind"] for b in found["bottleneck"].values()} == {"environment stepping"}
    page = tmp_path / "report.html"
    page.write_text(render(study, [], {}, found, verdict_lines(found)))
    browser = Browser(width=1000, height=900)
    try:
        browser.navigate(page.as_uri())
        browser.wait_for("document.querySelectorAll('th').length", what="the job table")
        heads = browser.evaluate("[...document.querySelectorAll('th')].length")
        right = browser.evaluate(
            "Math.max(...[...document.querySelectorAll('td, th')].map(c => c.getBoundingClientRect().right))"
        )
        lines = browser.evaluate(
            "[...document.querySelectorAll('th')].map(th => { const r = document.createRange(); "
            "r.selectNodeContents(th); return new Set([...r.getClientRects()]"
            ".map(x => Math.round(x.top))).size })"
        )
    finally:
        browser.close()
    assert heads == 17 and right <= 1000, (heads, right)
    assert max(lines) <= 3, lines


def test_the_jobs_table_orders_seeds_as_numbers():
    from rlbench.tracking.study_records import JobRun, _ordered

    jobs = [JobRun(f"r{s}", f"actors=4 seed={s}", "FINISHED", {"actors": "4"}, {}, {}) for s in (10023, 20023, 23)]
    assert [j.name for j in _ordered(jobs)] == ["actors=4 seed=23", "actors=4 seed=10023", "actors=4 seed=20023"]
