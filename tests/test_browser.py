"""The MLflow UI as a new user sees it, in headless Chromium (DevTools protocol, tests/cdp.py):
a tiny real sweep and its report, in a store that was moved after it was written, served by
`mlflow server` on 127.0.0.1. Screenshots go to test-artifacts/browser/ (RLBENCH_TEST_ARTIFACTS).
"""

import os
import shutil
import time
import urllib.parse
from pathlib import Path

import mlflow
import pytest

from rlbench.report.__main__ import main as report_main
from rlbench.tracking.store import ui_runs_url
from tests.conftest import CARTPOLE_TINY, ROOT, _unavailable, rlbench_cli

pytestmark = [pytest.mark.browser, pytest.mark.integration]
SHOTS = Path(os.environ.get("RLBENCH_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "browser"


@pytest.fixture
def browser():
    from tests.cdp import Browser, chromium_path

    if chromium_path() is None:
        _unavailable("no chromium here (Debian: apt-get install chromium; .ci/run installs it)")
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def moved_sweep(store, tmp_path):
    """A 2-job sweep and its report, written in one folder and then moved to another."""
    first = tmp_path / "first" / "mlruns"
    first.mkdir(parents=True)
    shutil.copyfile(store["db"], first / "mlflow.db")
    overrides = [o for o in store["overrides"] if not o.startswith(("tracking.uri", "tracking.artifact_location"))]
    out = rlbench_cli(["-m", "seed=1,2", *CARTPOLE_TINY, "actors=2", "progress=log", "telemetry.rate_hz=2",
                       f"tracking.uri=sqlite:///{first}/mlflow.db", *overrides], timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    uri = f"sqlite:///{first}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    parent = mlflow.search_runs(search_all_experiments=True, output_format="list",
                                filter_string="tags.`rlbench.role` = 'sweep'")[0]
    assert report_main(["--sweep", parent.info.run_id, "--tracking-uri", uri, "--out", str(tmp_path / "r")]) == 0
    moved = tmp_path / "moved"
    shutil.move(str(tmp_path / "first"), str(moved))
    return f"sqlite:///{moved}/mlruns/mlflow.db", parent


@pytest.fixture
def ui(moved_sweep, tmp_path):
    from tests.servers import MlflowServer, Unavailable

    try:
        server = MlflowServer(moved_sweep[0], tmp_path / "ui").start(deadline_s=120)
    except (Unavailable, OSError) as e:
        _unavailable(f"mlflow server did not start: {e}")
    yield server
    server.stop()


def test_a_sweep_reads_in_the_mlflow_ui(moved_sweep, ui, browser):
    uri, parent = moved_sweep
    exp, pid = parent.info.experiment_id, parent.info.run_id
    kids = mlflow.search_runs([exp], output_format="list", filter_string=f"tags.mlflow.parentRunId = '{pid}'")
    assert sorted(k.info.run_name for k in kids) == ["seed=1", "seed=2"]

    # the runs table the sweep prints: the children, in the "Model training" view
    url = ui_runs_url(uri, exp, pid).replace("http://127.0.0.1:5000", ui.url)
    browser.navigate(url)
    for name in ("seed=1", "seed=2"):
        browser.wait_for_text(name)
    browser.screenshot(SHOTS / "1_runs_table.png")

    # the parent's page: its description (the note the sweep and the report wrote) and summary metrics
    browser.navigate(f"{ui.url}/#/experiments/{exp}/runs/{pid}?workflowType=machine_learning")
    for text in ("rlbench sweep", "Compare the jobs", "Report", "best/fps", "jobs_finished", "knee"):
        browser.wait_for_text(text)
    browser.screenshot(SHOTS / "2_parent_run.png")
    link = browser.evaluate("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))"
                            ".find(h => h && h.includes('report/report.html'))")
    assert link == f"#/experiments/{exp}/runs/{pid}/artifactPath/report/report.html?workflowType=machine_learning"

    # the report artifact renders in the UI's artifact viewer (an iframe of the moved store's file)
    browser.navigate(f"{ui.url}/{link}")
    browser.wait_for_text("Path: rlbench-store:/test/")  # the artifact viewer, reading the moved store
    shown = "document.body.innerText.includes('rlbench report') && document.images.length > 0 && "\
            "[...document.images].every(i => i.complete && i.naturalWidth > 0)"
    deadline = time.monotonic() + 30
    while not any(browser.evaluate_in_frames(shown)):  # the report in the viewer's iframe, its figures loaded
        assert time.monotonic() < deadline, f"the report never rendered; frames: {browser.evaluate_in_frames('document.body.innerText.slice(0, 300)')}"
        time.sleep(0.2)
    browser.screenshot(SHOTS / "3_report_artifact.png")

    # a job's page: its description says what fps and task_fps are; the operations table is an artifact
    job = kids[0].info.run_id
    browser.navigate(f"{ui.url}/#/experiments/{exp}/runs/{job}?workflowType=machine_learning")
    for text in ("rlbench job", "task_fps", "Datasets", "CartPole-v1 (gym, frameskip 1)"):
        browser.wait_for_text(text)
    browser.screenshot(SHOTS / "4_job_run.png")
    browser.navigate(f"{ui.url}/#/experiments/{exp}/runs/{job}/artifactPath/operations.png?workflowType=machine_learning")
    browser.wait_for_text("Path: rlbench-store:/test/")
    browser.wait_for("[...document.images].some(i => i.complete && i.naturalWidth >= 800)",
                     what="operations.png drawn (the viewer shows it from a blob: URL)")
    browser.screenshot(SHOTS / "5_job_operations.png")
    print("screenshots:", *sorted(str(p) for p in SHOTS.glob("*.png")), sep="\n  ")
    assert urllib.parse.urlparse(ui.url).hostname == "127.0.0.1"
