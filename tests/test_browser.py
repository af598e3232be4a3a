"""The MLflow UI as a user sees it, in headless Chromium (DevTools protocol, tests/cdp.py):
a tiny real sweep and its report, in a store that was moved after it was written, served by
`mlflow server` on 127.0.0.1. Screenshots go to test-artifacts/browser/ (the folder
$RLBENCH_TEST_ARTIFACTS/browser/ when that is set); CI keeps them as test artifacts.
"""

import json
import os
import shutil
from pathlib import Path

import mlflow
import pytest

from rlbench.report.__main__ import main as report_main
from rlbench.tracking.store import ui_runs_url
from rlbench.tracking.views import REPEAT_GROUP, SHARE_PREFIX, grouped
from tests.conftest import CARTPOLE_TINY, ROOT, _unavailable, rlbench_cli

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.e2e]
SHOTS = Path(os.environ.get("RLBENCH_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "browser"

# MLflow 3 opens its Assistant panel on a first visit, taking a third of the page; a user who
# closed it once sees the run page in two columns, description and metrics side by side with
# the run's details. The UI remembers that in localStorage (the try: a sandboxed iframe has none).
CLOSE_ASSISTANT = ("try { localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');"
                   " localStorage.setItem('mlflow.assistant.panelOpen_v1', 'false') } catch (e) {}")


@pytest.fixture
def browser():
    try:
        from tests.cdp import Browser, chromium_path
    except ImportError as e:
        _unavailable(f"{e} (pip install -e '.[test]')")
    if chromium_path() is None:
        _unavailable("no chromium here (Debian: apt-get install chromium; .ci/run installs it)")
    shutil.rmtree(SHOTS, ignore_errors=True)  # only this run's screenshots
    b = Browser(failure_screenshot=SHOTS / "failed.png")
    try:
        b.call("Page.addScriptToEvaluateOnNewDocument", source=CLOSE_ASSISTANT)
        yield b
    finally:
        b.close()


@pytest.fixture
def moved_sweep(store, tmp_path):
    """A 2-job sweep and its report, written in one folder and then moved to another."""
    first = tmp_path / "first" / "mlruns"
    first.mkdir(parents=True)
    shutil.copyfile(store["db"], first / "mlflow.db")
    overrides = [o for o in store["overrides"] if not o.startswith(("tracking.uri", "tracking.artifact_location"))]
    # sm_limit=1: one torch thread for learner and inference; on a busy 2-core host the default
    # (all cores) makes the same 3000 frames take 30 s instead of 2 s
    out = rlbench_cli(["-m", "actors=2,4", *CARTPOLE_TINY, "sm_limit=1", "progress=log",
                       "telemetry.rate_hz=2", f"tracking.uri=sqlite:///{first}/mlflow.db", *overrides], timeout=300)
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
def ui(moved_sweep, tmp_path, monkeypatch):
    from tests.servers import MlflowServer, Unavailable

    # the UI alone: no job runner (MLflow 3 starts a pool of job-worker processes by default,
    # seconds of CPU on a 2-core host) and no usage telemetry
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        server = MlflowServer(moved_sweep[0], tmp_path / "ui").start(deadline_s=120)
    except (Unavailable, OSError) as e:
        _unavailable(f"mlflow server did not start: {e}")
    yield server
    server.stop()


def metric_names_shown() -> str:
    """JS: the first column of the run page's metrics table."""
    return ("[...document.querySelectorAll('[role=table]')].filter(t => t.innerText.startsWith('Metric'))"
            ".flatMap(t => [...t.querySelectorAll('[role=row]')].map(r => r.querySelector('[role=cell]')))"
            ".filter(c => c).map(c => c.innerText.trim())")


def shown_whole(text: str) -> str:
    """JS: the innermost element reading `text` is on screen down to its bottom edge (not clipped
    by a tree still unfolding)."""
    innermost = f"e.textContent === {json.dumps(text)} && ![...e.children].some(c => c.textContent === e.textContent)"
    return (f"[...document.querySelectorAll('body *')].filter(e => {innermost}).some(e => {{ "
            "const r = e.getBoundingClientRect(); "
            "const hit = r.height > 0 && document.elementFromPoint(r.x + r.width / 2, r.bottom - 1); "
            "return !!hit && e.contains(hit) })")


def above_the_fold(link: str) -> str:
    """JS: a link of the folded description ends above its "Show more" button."""
    return (f"(() => {{ const a = [...document.querySelectorAll('a')].find(a => a.textContent === {json.dumps(link)}); "
            "const more = document.querySelector('button[aria-label=\"Expand description\"]'); "
            "return !!a && !!more && a.getBoundingClientRect().bottom <= more.getBoundingClientRect().top })()")


def first_chart_title() -> str:
    """JS: the title of the chart view's first chart card."""
    return ("document.querySelector('[data-testid=experiment-view-compare-runs-card]')"
            "?.innerText.trim().split('\\n')[0]")


def group_rows() -> str:
    """JS: the runs table's group rows ("Group: <value>"), each once."""
    return ("[...new Set([...document.querySelectorAll('body *')].filter(e => !e.children.length)"
            ".map(e => e.textContent.trim()).filter(t => t.startsWith('Group: ')))].sort()")


def in_model_training_view() -> str:
    """JS: the page is in MLflow's "Model training" view (the GenAI one lists "Evaluation runs")."""
    return "!!document.body && /Runs/.test(document.body.innerText) && !/Evaluation runs/.test(document.body.innerText)"


def card_titles() -> str:
    """JS: the titles of the chart view's cards drawn now (MLflow draws a section's cards once it scrolls into view)."""
    return ("[...document.querySelectorAll('[data-testid=experiment-view-compare-runs-card]')]"
            ".map(c => c.innerText.trim().split('\\n')[0])")


def table_unfolded_and_padded() -> str:
    """JS: the description's table has rows one line tall and cells that begin and end with two
    non-breaking spaces and hold no other space (rlbench/tracking/parent_note.py table_row)."""
    return ("(() => { const t = [...document.querySelectorAll('table')].find(t => t.innerText.includes('runtime_s')); "
            "if (!t) return false; const line = parseFloat(getComputedStyle(t.querySelector('td')).lineHeight) || 21; "
            "return [...t.querySelectorAll('tr')].every(r => r.getBoundingClientRect().height < 1.6 * line) && "
            "[...t.querySelectorAll('td, th')].every(c => { const x = c.textContent; "
            "return x.startsWith('\\u00a0\\u00a0') && x.endsWith('\\u00a0\\u00a0') && !x.includes(' ') }) })()")


def constant_finals(client, kids) -> set[str]:
    """The metrics each job logged once (a final value), alike in both: the charts give them no card."""
    first, second = (k.data.metrics for k in kids)
    return {m for m, v in first.items() if second.get(m) == v and not m.startswith(("runtime_s", "op_frac/")) and
            all(len(client.get_metric_history(k.info.run_id, m)) == 1 for k in kids)}


def charts_read(browser, kids) -> None:
    """The sweep's chart view in a page tall enough to draw every card (MLflow draws a card once
    it is in view): no card for a metric alike in both jobs, one operation-share chart per role,
    the window series drawn over `task_elapsed_s` (the x axis's title)."""
    constants = constant_finals(mlflow.MlflowClient(), kids)
    assert {"sm_total", "actor_threads_used"} <= constants, constants  # one host, one thread each
    roles = sorted({m.split("/")[1] for m in kids[0].data.metrics if m.startswith("op_frac/")})
    browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=9000, deviceScaleFactor=1, mobile=False)
    try:
        ops = f"({card_titles()}).filter(t => t.startsWith('op_frac/')).map(t => t.split('/')[1]).sort()"
        browser.wait_for(f"JSON.stringify({ops}) === {json.dumps(json.dumps(roles, separators=(',', ':')))} && "
                         f"({card_titles()}).includes('window/fps') && ({card_titles()}).includes('loss')",
                         what=f"one operation-share chart per role {roles}, window/fps and MLflow's own cards")
        seen = set(browser.evaluate(card_titles()))
        assert not constants & seen, constants & seen
        card = card_titles().replace(".map(c => c.innerText.trim().split('\\n')[0])",
                                     ".find(c => c.innerText.trim().split('\\n')[0] === 'window/fps')")
        browser.wait_for(f"({card})?.querySelector('.xtitle')?.textContent === 'task_elapsed_s'",
                         what="window/fps drawn over task_elapsed_s")
        browser.screenshot(SHOTS / "1e_runs_charts_all.png")
    finally:
        browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)


def test_a_sweep_reads_in_the_mlflow_ui(browser, moved_sweep, ui):  # browser first: no chromium, no sweep
    uri, parent = moved_sweep
    exp, pid = parent.info.experiment_id, parent.info.run_id
    kids = mlflow.search_runs([exp], output_format="list", filter_string=f"tags.mlflow.parentRunId = '{pid}'")
    assert sorted(k.info.run_name for k in kids) == ["actors=2", "actors=4"]
    run_page = f"{ui.url}/#/experiments/{exp}/runs/{{}}?workflowType=machine_learning"

    # the address the sweep prints: its jobs with their knob and headline numbers as columns,
    # shortest task first, without touching "Columns"
    table = ui_runs_url(uri, exp, f"rlbench-{pid}").replace("http://127.0.0.1:5000", ui.url)
    browser.navigate(table)
    for text in ("actors=2", "actors=4", "runtime_s", "task_fps", "fps", "energy_per_task_j", "bound",
                 "not measured: "):
        browser.wait_for_text(text)
    browser.wait_for(in_model_training_view(), what="the Model training view")
    browser.screenshot(SHOTS / "1_runs_table.png")
    browser.navigate(table + "&compareRunsMode=CHART")  # its chart view: the headline numbers as bars first
    browser.wait_for(f"({first_chart_title()}) === 'runtime_s'", what="runtime_s as the first chart")
    browser.screenshot(SHOTS / "1b_runs_charts.png")
    charts_read(browser, kids)

    # the parent's page: its description (the note the sweep and the report wrote) and its metrics
    browser.navigate(run_page.format(pid))
    browser.wait_for("document.body && /Description\\s+rlbench sweep/.test(document.body.innerText)",
                     what="a description starting with 'rlbench sweep'")
    for link in ("Jobs table", "Charts", "Report"):  # the first lines, above the description's fold
        browser.wait_for(above_the_fold(link), what=f"the description's '{link}' link above 'Show more'")
    browser.evaluate("document.querySelector('button[aria-label=\"Expand description\"]')?.click()")  # Show more
    for text in ("energy_per_task_j", "bound", "knee"):  # the jobs' table, the report's verdict
        browser.wait_for_text(text)
    browser.wait_for(table_unfolded_and_padded(), what="the jobs' table: each cell one line, with its margins")
    want = ["best/fps", "best/runtime_s", "jobs_finished"]
    browser.wait_for(f"{json.dumps(want)}.every(m => ({metric_names_shown()}).includes(m))",
                     what=f"metrics {want} in the metrics table")
    browser.screenshot(SHOTS / "2_parent_run.png")

    # the report: the description's "Report" link (it opens a new tab) shows it in the artifact
    # viewer, an iframe of the moved store's file, with its heading and its figures drawn
    link = browser.evaluate("[...document.querySelectorAll('a')].find(a => a.innerText === 'Report')?.href")
    assert link and "/artifactPath/report/report.html" in link, f"the description's 'Report' link: {link}"
    browser.navigate(link)
    browser.wait_for_text("Path: rlbench-store:/test/")  # the viewer, reading the moved store
    browser.wait_for(shown_whole("report.html"), what="report.html in the artifact tree, unfolded")
    browser.wait_for("document.body?.innerText.includes('rlbench report: sweep actors=2,4') && document.images.length"
                     " > 0 && [...document.images].every(i => i.complete && i.naturalWidth > 0)", frames=True,
                     what="the report's heading and its figures loaded, in the viewer's iframe")
    browser.wait_for("/knee[^\\n]*task/.test(document.body?.innerText || '')", frames=True,
                     what="the report's verdict judging the knee on the task's time")
    browser.screenshot(SHOTS / "3_report_artifact.png")
    browser.evaluate_in_frames("scrollTo(0, document.images[0].getBoundingClientRect().top + scrollY - 200)")
    browser.screenshot(SHOTS / "4_report_figure.png")

    # a job's page: its description says what fps and task_fps are and links its headline
    # charts; in the Model training view; those charts start with the task's time
    job = kids[0].info.run_id
    browser.navigate(run_page.format(job))
    for text in ("rlbench job", "task_fps", "Datasets", "CartPole-v1 (gym, frameskip 1)", "Headline charts"):
        browser.wait_for_text(text)
    browser.wait_for(in_model_training_view(), what="the Model training view")
    browser.screenshot(SHOTS / "5_job_run.png")
    charts = browser.evaluate("[...document.querySelectorAll('a')].find(a => a.innerText === 'Headline charts')?.href")
    assert charts and f"viewStateShareKey=rlbench-job-{job}" in charts, charts
    browser.navigate(charts)
    browser.wait_for(f"({first_chart_title()}) === 'runtime_s'", what="runtime_s as the job's first chart")
    browser.screenshot(SHOTS / "5b_job_headline_charts.png")
    browser.navigate(run_page.format(f"{job}/artifactPath/operations.png"))
    browser.wait_for_text("Path: rlbench-store:/test/")
    browser.wait_for("[...document.images].some(i => i.complete && i.naturalWidth >= 800)",
                     what="operations.png drawn (the viewer shows it from a blob: URL)")
    browser.screenshot(SHOTS / "6_job_operations.png")
    grouped_view(browser, uri, exp, pid, table)
    print("screenshots:", *sorted(str(p) for p in SHOTS.glob("*.png")), sep="\n  ")


def grouped_view(browser, uri: str, exp: str, pid: str, table: str) -> None:
    """The sweep's address as a sweep with repeats stores it (rlbench/sweeps/sweep.py sweep_view):
    its view grouped by the runs' tag `repeat_group`, here each job its own configuration (the
    tag the sweep gives a repeat, set by this test on this 2-job sweep): MLflow's table shows a
    group row per configuration with its runs open below it, and the chart view draws the groups."""
    client = mlflow.MlflowClient(uri)
    kids = client.search_runs([exp], f"tags.mlflow.parentRunId = '{pid}'")
    for kid in kids:
        client.set_tag(kid.info.run_id, REPEAT_GROUP, kid.info.run_name)
    key = f"{SHARE_PREFIX}rlbench-{pid}"
    state = json.loads(client.get_experiment(exp).tags[key]) | grouped(REPEAT_GROUP)
    client.set_experiment_tag(exp, key, json.dumps(state))
    browser.navigate(table)
    want = ["Group: actors=2", "Group: actors=4"]
    browser.wait_for(f"JSON.stringify({group_rows()}) === {json.dumps(json.dumps(want, separators=(',', ':')))}",
                     what=f"group rows {want}")
    browser.wait_for("['actors=2', 'actors=4'].every(n => document.body.innerText.split('\\n')"
                     ".some(line => line.trim() === n))", what="each group's run below it (the groups open)")
    browser.screenshot(SHOTS / "1c_runs_table_grouped.png")
    browser.navigate(table + "&compareRunsMode=CHART")
    browser.wait_for(f"({first_chart_title()}) === 'runtime_s'", what="runtime_s as the first grouped chart")
    browser.screenshot(SHOTS / "1d_runs_charts_grouped.png")
