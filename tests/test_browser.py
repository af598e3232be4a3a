"""The MLflow UI as a user sees it, in headless Chromium (DevTools protocol, tests/cdp.py):
a tiny real sweep with repeats and its report, and a search, in a store that was moved after
it was written, served by `mlflow server` on 127.0.0.1. Screenshots go to
test-artifacts/browser/ (the folder $RLBENCH_TEST_ARTIFACTS/browser/ when that is set); CI
keeps them as test artifacts.
"""

import json
import os
import re
import shutil
import statistics
import time
import urllib.parse
from importlib.metadata import entry_points
from pathlib import Path

import mlflow
import pytest

from rlbench.cli.report import main as report_main
from rlbench.report.figures import actor_scaling
from rlbench.tracking.parent_note import artifact_link
from rlbench.tracking.record import rounded
from rlbench.tracking.store import ui_hint, ui_runs_url
from rlbench.tracking.study_records import load_parent
from rlbench.tracking.ui_app import VIEW_KEY
from rlbench.tracking.views import MORE_SECTION, VERDICT_TAG, view_link
from tests.conftest import CARTPOLE_TINY, ROOT, _unavailable

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.e2e]
SHOTS = Path(os.environ.get("RLBENCH_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "browser"

# MLflow 3 opens its Assistant panel on a first visit, taking a third of the page; a user who
# closed it once sees the run page in two columns, description and metrics side by side with
# the run's details. The UI remembers that in localStorage (the try: a sandboxed iframe has none).
CLOSE_ASSISTANT = (
    "try { localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');"
    " localStorage.setItem('mlflow.assistant.panelOpen_v1', 'false') } catch (e) {}"
)


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
def moved_sweep(store, tmp_path, rlbench_main):
    """A sweep of 2 configurations x 3 repeats (a median apart from the average) and its report,
    and a 1-trial search, written in one folder and then moved to another; both commands run in
    this process (rlbench_main: one interpreter's imports for both)."""
    first = tmp_path / "first" / "mlruns"
    first.mkdir(parents=True)
    shutil.copyfile(store["db"], first / "mlflow.db")
    uri = f"sqlite:///{first}/mlflow.db"
    overrides = [o for o in store["overrides"] if not o.startswith(("tracking.uri", "tracking.artifact_location"))]
    # sm_limit=1: one torch thread for learner and inference; on a busy 2-core host the default
    # (all cores) makes the same 3000 frames take 30 s instead of 2 s
    # 8000 frames: a job of at least the 1 s a window series needs (tracking.log_every_s), on a fast host too
    tiny = [
        *CARTPOLE_TINY,
        "workload.frames=8000",
        "progress=log",
        "telemetry.rate_hz=2",
        f"tracking.uri={uri}",
        *overrides,
    ]
    out = rlbench_main(["-m", "actors=2,4", "repeats=3", "sm_limit=1", *tiny])
    assert out.returncode == 0, out.stderr[-2000:]
    out = rlbench_main(
        [
            "-m",
            "search=ratio",
            "search.n_trials=1",
            f"search.storage=sqlite:///{tmp_path}/optuna.db",
            "search.actors=[2,2]",
            "search.actor_threads=[1,1]",
            "search.sm_limit=[1,1]",
            *tiny,
        ]
    )
    assert out.returncode == 0, out.stderr[-2000:]
    mlflow.set_tracking_uri(uri)
    parent, search = (
        mlflow.search_runs(
            search_all_experiments=True, output_format="list", filter_string=f"tags.`rlbench.role` = '{role}'"
        )[0]
        for role in ("sweep", "study")
    )
    assert report_main(["--sweep", parent.info.run_id, "--tracking-uri", uri, "--out", str(tmp_path / "r")]) == 0
    moved = tmp_path / "moved"
    shutil.move(str(tmp_path / "first"), str(moved))
    mlflow.set_tracking_uri(f"sqlite:///{moved}/mlruns/mlflow.db")  # the test reads the record where it now is
    return f"sqlite:///{moved}/mlruns/mlflow.db", parent, search


@pytest.fixture
def printed_app():
    """The `--app-name` of the command a sweep prints to start its store's UI (None: none),
    checked to be installed before the sweep runs."""
    found = re.search(r"--app-name (\S+)", ui_hint("sqlite:///mlruns/mlflow.db", "1", "rlbench-x"))
    app = found.group(1) if found else None
    if app and not entry_points(group="mlflow.app", name=app):
        _unavailable(
            f"no mlflow.app entry point {app!r} in this Python: pip install -e . (pyproject.toml registers it)"
        )
    return app


@pytest.fixture
def ui(printed_app, moved_sweep, tmp_path):
    """The UI served as the printed start command serves it (its `--app-name`)."""
    from tests.servers import MlflowServer, Unavailable

    try:
        server = MlflowServer(moved_sweep[0], tmp_path / "ui", app_name=printed_app).start(deadline_s=120)
    except (Unavailable, OSError) as e:
        _unavailable(f"mlflow server did not start: {e}")
    yield server
    server.stop()


def metric_names_shown() -> str:
    """JS: the first column of the run page's metrics table."""
    return (
        "[...document.querySelectorAll('[role=table]')].filter(t => t.innerText.startsWith('Metric'))"
        ".flatMap(t => [...t.querySelectorAll('[role=row]')].map(r => r.querySelector('[role=cell]')))"
        ".filter(c => c).map(c => c.innerText.trim())"
    )


def shown_whole(text: str) -> str:
    """JS: the innermost element reading `text` is on screen down to its bottom edge (not clipped
    by a tree still unfolding)."""
    innermost = f"e.textContent === {json.dumps(text)} && ![...e.children].some(c => c.textContent === e.textContent)"
    return (
        f"[...document.querySelectorAll('body *')].filter(e => {innermost}).some(e => {{ "
        "const r = e.getBoundingClientRect(); "
        "const hit = r.height > 0 && document.elementFromPoint(r.x + r.width / 2, r.bottom - 1); "
        "return !!hit && e.contains(hit) })"
    )


# JS: the run page's description box (MLflow 3.17: the box before its "Show more" toggle; a
# description too short to fold has none: the box of its first paragraph, "rlbench ...")
DESCRIPTION = (
    "(document.querySelector('[data-testid=show-comment-toggle]')?.previousElementSibling || "
    "[...document.querySelectorAll('p')].find(p => /^rlbench (sweep|search|job)/.test(p.textContent))?.parentElement)"
)


def readable_folded(text: str) -> str:
    """JS: the paragraph of the folded description reading `text` ends where MLflow's fade (the
    `truncation-gradient` over the fold's lower 60%, transparent to opaque from its top down) is
    at most a quarter opaque: it reads as the lines above it do."""
    return (
        f"(() => {{ const box = {DESCRIPTION}; const fade = box?.querySelector('[data-testid=truncation-gradient]');"
        f" const e = box && [...box.querySelectorAll('p, li')].find(e => e.textContent.trim() === {json.dumps(text)});"
        " if (!e || !fade) return false; const f = fade.getBoundingClientRect();"
        " return e.getBoundingClientRect().bottom <= f.top + f.height / 4 })()"
    )


def mouse_click(browser, link: str, what: str) -> str:
    """Click the link `link` (JS) with the mouse at its centre, as a user does (DevTools' Input
    events: whatever the page hit-tests there takes the click, MLflow's fade too); the address it
    opened, relative to the UI (`#/...`), in this page or in a new tab (MLflow opens a
    description's links in one), which is closed again."""
    at = browser.evaluate(
        f"(() => {{ const a = {link}; if (!a) return null; a.scrollIntoView({{block: 'center'}}); "
        "const r = a.getBoundingClientRect(); const x = r.x + r.width / 2, y = r.y + r.height / 2; "
        "const hit = document.elementFromPoint(x, y); "
        "return {x, y, href: a.href, text: a.textContent, hit: hit ? hit.outerHTML.slice(0, 160) : null} })()"
    )
    assert at, f"no {what} link on the page: {browser.text()[:1500]}"
    before = {t["targetId"] for t in browser.call("Target.getTargets")["targetInfos"]}
    start = browser.evaluate("location.href")
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        pressed = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
        browser.call("Input.dispatchMouseEvent", type=kind, x=at["x"], y=at["y"], **pressed)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        new = [t for t in browser.call("Target.getTargets")["targetInfos"] if t["targetId"] not in before]
        url = next((t["url"] for t in new if t["type"] == "page" and t["url"] not in ("", "about:blank")), None)
        if url is None and browser.evaluate("location.href") != start:
            url = browser.evaluate("location.href")
        if url is not None:
            for t in new:
                browser.call("Target.closeTarget", targetId=t["targetId"])
            return "#" + url.split("#", 1)[1] if "#" in url else url
        time.sleep(0.1)  # a click opens its page asynchronously; no event says it will not
    raise AssertionError(
        f"clicking {what} link {at['text']!r} at its centre opened nothing; the element there: {at['hit']}"
    )


def click_every_link(browser, page: str, what: str) -> list[str]:
    """Each link of `page`'s description clicked with the mouse (mouse_click), in a page loaded
    anew for each: folded, every link but the jobs' table's (which are below the fold); unfolded
    ("Show more"), the table's. The addresses they opened, each checked to be its link's own."""
    count = f"[...({DESCRIPTION})?.querySelectorAll('a') || []].length"
    in_table = "!!a.closest('table')"
    opened = []
    for unfold in (False, True):
        browser.navigate(page)
        n = browser.wait_for(f"({count}) > 0 && ({count})", what=f"{what} description's links")
        for i in range(n):
            browser.navigate(page)
            browser.wait_for(f"({count}) === {n}", what=f"{what} description's {n} links")
            if unfold:
                browser.evaluate("document.querySelector('button[aria-label=\"Expand description\"]')?.click()")
                browser.wait_for("!document.querySelector('[data-testid=truncation-gradient]')", what="unfolded")
            link = f"[...({DESCRIPTION}).querySelectorAll('a')][{i}]"
            if browser.evaluate(f"(a => {in_table})({link})") != unfold:
                continue
            href = browser.evaluate(f"{link}.getAttribute('href')")
            got = mouse_click(browser, link, f"{what} {'unfolded' if unfold else 'folded'}")
            assert same_page(href, got), f"{what} link {href} opened {got}"
            opened.append(href)
    return opened


def same_page(href: str, url: str) -> bool:
    """`url` is the page `href` names: its route, and every parameter of `href` (MLflow adds its
    runs page's facets to the address once it applied a shared view)."""
    path, _, query = href.partition("?")
    got_path, _, got_query = url.partition("?")
    path, got_path = (p if "#" in p or urllib.parse.urlsplit(p).path else p + "/" for p in (path, got_path))
    got = urllib.parse.parse_qs(got_query)
    return path == got_path and all(got.get(k) == v for k, v in urllib.parse.parse_qs(query).items())


def first_chart_title() -> str:
    """JS: the title of the chart view's first chart card."""
    return "document.querySelector('[data-testid=experiment-view-compare-runs-card]')?.innerText.trim().split('\\n')[0]"


def group_rows() -> str:
    """JS: the runs table's group rows ("Group: <value>"), each once."""
    return (
        "[...new Set([...document.querySelectorAll('body *')].filter(e => !e.children.length)"
        ".map(e => e.textContent.trim()).filter(t => t.startsWith('Group: ')))].sort()"
    )


def in_model_training_view() -> str:
    """JS: the page is in MLflow's "Model training" view (the GenAI one lists "Evaluation runs")."""
    return "!!document.body && /Runs/.test(document.body.innerText) && !/Evaluation runs/.test(document.body.innerText)"


def card_titles() -> str:
    """JS: the titles of the chart view's cards drawn now (MLflow draws a section's cards once it scrolls into view)."""
    return (
        "[...document.querySelectorAll('[data-testid=experiment-view-compare-runs-card]')]"
        ".map(c => c.innerText.trim().split('\\n')[0])"
    )


def table_unfolded_and_padded() -> str:
    """JS: the description's table has rows one line tall and cells that begin and end with two
    non-breaking spaces and hold no other space (rlbench/tracking/parent_note.py table_row)."""
    return (
        "(() => { const t = [...document.querySelectorAll('table')].find(t => t.innerText.includes('runtime_s')); "
        "if (!t) return false; const line = parseFloat(getComputedStyle(t.querySelector('td')).lineHeight) || 21; "
        "return [...t.querySelectorAll('tr')].every(r => r.getBoundingClientRect().height < 1.6 * line) && "
        "[...t.querySelectorAll('td, th')].every(c => { const x = c.textContent; "
        "return x.startsWith('\\u00a0\\u00a0') && x.endsWith('\\u00a0\\u00a0') && !x.includes(' ') }) })()"
    )


def constant_finals(client, kids) -> set[str]:
    """The metrics each job logged once (a final value), alike in all: the charts give them no card."""
    first, *others = (k.data.metrics for k in kids)
    return {
        m
        for m, v in first.items()
        if all(o.get(m) == v for o in others)
        and not m.startswith(("runtime_s", "op_frac/"))
        and all(len(client.get_metric_history(k.info.run_id, m)) == 1 for k in kids)
    }


def charts_read(browser, kids) -> None:
    """The sweep's chart view in a page tall enough to draw every card (MLflow draws a card once
    it is in view): no card for a metric alike in every job, a chart per major operation share of
    every role, the window series drawn over `task_elapsed_s` (the x axis's title), and every
    other metric in the folded section "more" (no "Model metrics" of MLflow's own)."""
    constants = constant_finals(mlflow.MlflowClient(), kids)
    assert {"sm_total", "actor_threads_used"} <= constants, constants  # one host, one thread each
    roles = sorted({m.split("/")[1] for m in kids[0].data.metrics if m.startswith("op_frac/")})
    browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=9000, deviceScaleFactor=1, mobile=False)
    try:
        ops = f"[...new Set(({card_titles()}).filter(t => t.startsWith('op_frac/')).map(t => t.split('/')[1]))].sort()"
        browser.wait_for(
            f"JSON.stringify({ops}) === {json.dumps(json.dumps(roles, separators=(',', ':')))} && "
            f"({card_titles()}).includes('window/fps') && document.body.innerText.includes({json.dumps(MORE_SECTION)})",
            what=f"operation-share charts of every role {roles}, window/fps and the folded section 'more'",
        )
        assert not browser.evaluate(f"({card_titles()}).includes('loss')")  # folded: drawn once opened
        assert "Model metrics" not in browser.text()  # every metric has its card: MLflow adds no section
        browser.evaluate(
            "[...document.querySelectorAll('body *')].filter(e => !e.children.length && "
            f"e.textContent.startsWith({json.dumps(MORE_SECTION[:30])})).forEach(e => e.click())"
        )
        browser.wait_for(f"({card_titles()}).includes('loss')", what="the 'more' section opened: the loss's card")
        seen = set(browser.evaluate(card_titles()))
        assert not constants & seen, constants & seen
        card = card_titles().replace(
            ".map(c => c.innerText.trim().split('\\n')[0])",
            ".find(c => c.innerText.trim().split('\\n')[0] === 'window/fps')",
        )
        browser.wait_for(
            f"({card})?.querySelector('.xtitle')?.textContent === 'task_elapsed_s'",
            what="window/fps drawn over task_elapsed_s",
        )
        browser.screenshot(SHOTS / "1c_runs_charts_all.png")
    finally:
        browser.call("Emulation.setDeviceMetricsOverride", width=1400, height=1000, deviceScaleFactor=1, mobile=False)


def test_a_sweep_reads_in_the_mlflow_ui(browser, printed_app, moved_sweep, ui):  # browser, app first: none, no sweep
    uri, parent, search = moved_sweep
    exp, pid = parent.info.experiment_id, parent.info.run_id
    kids = mlflow.search_runs([exp], output_format="list", filter_string=f"tags.mlflow.parentRunId = '{pid}'")
    assert sorted(k.info.run_name for k in kids) == [
        "actors=2 seed=1",
        "actors=2 seed=10001",
        "actors=2 seed=20001",
        "actors=4 seed=1",
        "actors=4 seed=10001",
        "actors=4 seed=20001",
    ]
    run_page = f"{ui.url}/#/experiments/{exp}/runs/{{}}?workflowType=machine_learning"

    # the address the sweep prints: its jobs with their knob and headline numbers as columns,
    # shortest task first, grouped by configuration, without touching "Columns"
    table = ui_runs_url(uri, exp, f"rlbench-{pid}").replace("http://127.0.0.1:5000", ui.url)
    browser.navigate(table)
    for text in (
        "actors=2",
        "actors=4",
        "runtime_s",
        "task_fps",
        "fps",
        "verdict",
    ):
        browser.wait_for_text(text)
    browser.wait_for(in_model_training_view(), what="the Model training view")
    grouped_rows(browser, kids)
    browser.screenshot(SHOTS / "1_runs_table.png")
    browser.call("Page.reload")  # MLflow wrote the facets into the address: the view comes back all the same
    grouped_rows(browser, kids)
    click(browser, anchor("a.innerText.trim() === 'actors=2 seed=1'"), "a run's")
    browser.wait_for("/\\/runs\\/[0-9a-f]{32}/.test(location.hash)", what="the run's page")
    browser.evaluate("history.back()")  # Back onto the printed view
    grouped_rows(browser, kids)
    browser.evaluate(scroll_right())  # the grid draws the columns in sight: `bound` is past 1400 px
    browser.wait_for_text("bound")
    for text in ("energy_per_task_j", "not measured (hover: why)"):  # unmeasurable here: a mark, its reasons on hover
        browser.wait_for_text(text)
    reasons = browser.evaluate(
        "[...document.querySelectorAll('[role=gridcell][col-id=\"tags.`energy_per_task_j`\"]')]"
        ".map(c => c.title).filter(t => t)"
    )
    assert reasons and all(r == kids[0].data.tags["energy_per_task_j"] for r in reasons), reasons
    browser.screenshot(SHOTS / "1d_runs_table_right.png")
    mlflow_links_stay_in_model_training(browser, exp, pid, min(kids, key=lambda k: k.info.run_name))
    browser.navigate(table + "&compareRunsMode=CHART")  # its chart view: the headline numbers as bars first
    browser.wait_for(f"({first_chart_title()}) === 'runtime_s'", what="runtime_s as the first chart")
    browser.screenshot(SHOTS / "1b_runs_charts.png")
    charts_read(browser, kids)

    # the parent's page: its description (the note the sweep and the report wrote), folded, shows
    # what ran, its links and the verdict above MLflow's fade; every link opens its page when
    # clicked with the mouse, the first ones folded, the jobs' table's once unfolded
    page = run_page.format(pid)
    browser.navigate(page)
    browser.wait_for(
        "document.body && /Description\\s+rlbench sweep actors=2,4 repeats=3 ·/.test(document.body.innerText)",
        what="a description starting with 'rlbench sweep actors=2,4 repeats=3' (not 'sweep sweep')",
    )
    verdict = f"Verdict: {parent.data.tags[VERDICT_TAG]}"  # the sweep's answer, also its parent's tag
    assert verdict.startswith("Verdict: Best by median runtime_s: actors="), verdict
    browser.wait_for(readable_folded(verdict), what=f"{verdict!r} readable in the folded description")
    opened = click_every_link(browser, page, "a sweep parent's")
    assert sorted(opened) == sorted(
        [view_link(exp, f"rlbench-{pid}"), view_link(exp, f"rlbench-{pid}", chart=True)]
        + [artifact_link(exp, pid, f) for f in ("report/report.html", "summary.csv", "report/report.html")]
        + [artifact_link(exp, pid, "report/findings.json")]
        + [f"#/experiments/{exp}/runs/{k.info.run_id}?workflowType=machine_learning" for k in kids]
    ), opened  # the first links (the report twice: there and in its section), each job by its repeat
    browser.navigate(page)
    browser.evaluate("document.querySelector('button[aria-label=\"Expand description\"]')?.click()")  # Show more
    for text in ("energy_per_task_j", "bound", "knee"):  # the jobs' table, the report's verdict
        browser.wait_for_text(text)
    browser.wait_for(table_unfolded_and_padded(), what="the jobs' table: each cell one line, with its margins")
    want = ["best/fps", "best/runtime_s", "jobs_finished"]
    browser.wait_for(
        f"{json.dumps(want)}.every(m => ({metric_names_shown()}).includes(m))",
        what=f"metrics {want} in the metrics table",
    )
    browser.screenshot(SHOTS / "2_parent_run.png")

    # the report: the description's "Report" link (it opens a new tab) shows it in the artifact
    # viewer, an iframe of the moved store's file, with its heading and its figures drawn
    link = browser.evaluate("[...document.querySelectorAll('a')].find(a => a.innerText === 'Report')?.href")
    assert link and "/artifactPath/report/report.html" in link, f"the description's 'Report' link: {link}"
    browser.navigate(link)
    browser.wait_for_text("Path: rlbench-store:/test/")  # the viewer, reading the moved store
    browser.wait_for(shown_whole("report.html"), what="report.html in the artifact tree, unfolded")
    browser.wait_for(
        "document.body?.innerText.includes('rlbench report: sweep actors=2,4') && document.images.length"
        " > 0 && [...document.images].every(i => i.complete && i.naturalWidth > 0)",
        frames=True,
        what="the report's heading and its figures loaded, in the viewer's iframe",
    )
    browser.wait_for(
        "/knee[^\\n]*task/.test(document.body?.innerText || '')",
        frames=True,
        what="the report's verdict judging the knee on the task's time",
    )
    browser.screenshot(SHOTS / "3_report_artifact.png")
    figure_3_from_medians(browser, pid, kids)
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
    opened = click_every_link(browser, run_page.format(job), "a job's")  # and the timeline's viewer, with a trace
    assert opened in (["#" + charts.split("#", 1)[1]], ["#" + charts.split("#", 1)[1], "https://ui.perfetto.dev"]), (
        opened
    )
    browser.navigate(charts)
    browser.wait_for(f"({first_chart_title()}) === 'runtime_s'", what="runtime_s as the job's first chart")
    browser.screenshot(SHOTS / "5b_job_headline_charts.png")
    browser.navigate(run_page.format(f"{job}/artifactPath/operations.png"))
    browser.wait_for_text("Path: rlbench-store:/test/")
    browser.wait_for(
        "[...document.images].some(i => i.complete && i.naturalWidth >= 800)",
        what="operations.png drawn (the viewer shows it from a blob: URL)",
    )
    browser.screenshot(SHOTS / "6_job_operations.png")
    search_page(browser, run_page, search)
    print("screenshots:", *sorted(str(p) for p in SHOTS.glob("*.png")), sep="\n  ")


def grouped_rows(browser, kids: list) -> None:
    """The sweep's repeats as its view stores them (rlbench/sweeps/sweep.py sweep_view): grouped
    by the runs' tag `repeat_group`, a group row per configuration with its runs open below it,
    each run showing the verdict the sweep tagged it with (`best` on the best configuration's)."""
    want = ["Group: actors=2", "Group: actors=4"]
    browser.wait_for(
        f"JSON.stringify({group_rows()}) === {json.dumps(json.dumps(want, separators=(',', ':')))}",
        what=f"group rows {want}",
    )
    names = sorted(k.info.run_name for k in kids)
    browser.wait_for(
        f"{json.dumps(names)}.every(n => document.body.innerText.split('\\n').some(line => line.trim() === n))",
        what="each group's runs below it (the groups open)",
    )
    verdicts = sorted({k.data.tags[VERDICT_TAG] for k in kids})
    assert any(v.startswith("best") for v in verdicts) and len(verdicts) == 2, verdicts  # one per configuration
    browser.wait_for(
        f"{json.dumps(verdicts)}.every(v => {cells_reading()}(v) === 4)",
        what=f"each configuration's verdict {verdicts} on its 3 runs and its group row (group_rows_read)",
    )
    group_rows_read(browser, kids)


def group_rows_read(browser, kids: list) -> None:
    """rlbench's UI app (tracking/ui_app.py group_rows_script): each group row shows the median of
    its finished runs (not MLflow's average: one centre value, as the terminal, the note and the
    report give it) to 6 significant digits, as its runs' values are logged, and its
    configuration's verdict."""
    groups: dict[str, list] = {}
    for k in kids:
        groups.setdefault(k.data.tags["repeat_group"], []).append(k)
    want, cells = {}, []
    for group, runs in sorted(groups.items()):
        row = f'[role=row][row-id="tag.repeat_group.{group}"]'
        for m in ("runtime_s", "fps"):
            values = [r.data.metrics[m] for r in runs]
            centre = rounded(statistics.median(values))  # as logged: tracking/record.py
            assert centre != rounded(statistics.mean(values)), values  # the test tells the median from the average
            want[f"{group} {m}"] = f"{int(centre) if centre.is_integer() else centre} (median of {len(runs)})"
            cells.append((f"{group} {m}", f'{row} [col-id="metrics.`{m}`"]'))
        want[f"{group} verdict"] = runs[0].data.tags[VERDICT_TAG]
        cells.append((f"{group} verdict", f'{row} [col-id="tags.`{VERDICT_TAG}`"]'))
    read = (
        "({"
        + ", ".join(f"{json.dumps(n)}: document.querySelector({json.dumps(c)})?.innerText.trim()" for n, c in cells)
        + "})"
    )
    try:
        browser.wait_for(f"JSON.stringify({read}) === {json.dumps(json.dumps(want, separators=(',', ':')))}")
    except AssertionError:
        raise AssertionError(f"group rows: want {want}, read {browser.evaluate(read)}") from None


def anchor(condition: str) -> str:
    """JS: the page's first link `a` meeting `condition`."""
    return f"[...document.querySelectorAll('a')].find(a => {condition})"


def click(browser, link: str, what: str) -> str:
    """Click the link `link` (JS) as a user does (MLflow's router follows it); its href."""
    href = browser.evaluate(f"(() => {{ const a = {link}; a?.click(); return a?.getAttribute('href') }})()")
    assert href, f"no {what} link on the page: {browser.text()[:1500]}"
    return href


def arrive(browser, hash_end: str, text: str, shot: str) -> None:
    """Wait for the page at an address ending `hash_end` showing `text`, then for the Model training view."""
    browser.wait_for(
        f"location.hash.split('?')[0].endsWith({json.dumps(hash_end)}) && "
        f"document.body.innerText.includes({json.dumps(text)})",
        what=f"{text!r} at ...{hash_end}",
    )
    browser.wait_for(in_model_training_view(), what=f"the Model training view at {browser.evaluate('location.href')}")
    browser.screenshot(SHOTS / shot)


def mlflow_links_stay_in_model_training(browser, exp: str, pid: str, job) -> None:
    """From the printed address, in this fresh profile: MLflow's own links, which carry no
    `workflowType` (a run's name in its table; on the run page the breadcrumb to the experiment
    and the parent run), open in the Model training view: the view the UI app (its --app-name)
    records for a browser that never chose one."""
    name, run = job.info.run_name, job.info.run_id
    href = click(browser, anchor(f"a.innerText.trim() === {json.dumps(name)}"), f"run name {name!r}")
    assert "workflowType" not in href, href  # MLflow's link: the view is not in the address
    arrive(browser, f"/runs/{run}", "Parent run", "1e_run_name_clicked.png")
    assert browser.evaluate(f"localStorage.getItem({json.dumps(VIEW_KEY)})") == '"machine_learning"'
    experiment = mlflow.get_experiment(exp).name
    crumb = anchor(
        f"a.innerText.trim() === {json.dumps(experiment)} && "
        f"(a.getAttribute('href') || '').startsWith('#/experiments/{exp}/')"
    )
    click(browser, crumb, f"breadcrumb {experiment!r}")
    arrive(browser, f"/experiments/{exp}/runs", "matching runs", "1f_breadcrumb_clicked.png")
    browser.evaluate("history.back()")
    arrive(browser, f"/runs/{run}", "Parent run", "1g_run_page_again.png")
    click(browser, anchor(f"(a.getAttribute('href') || '').endsWith('/runs/{pid}')"), "parent run")
    arrive(browser, f"/runs/{pid}", "rlbench sweep", "1h_parent_clicked.png")


def scroll_right() -> str:
    """JS: every horizontally scrolled box of the page (the runs table's) scrolled to its right end."""
    return (
        "[...document.querySelectorAll('body *')].filter(e => e.scrollWidth > e.clientWidth + 1 && "
        "['auto', 'scroll'].includes(getComputedStyle(e).overflowX)).forEach(e => { e.scrollLeft = e.scrollWidth; "
        "e.dispatchEvent(new Event('scroll')) })"
    )


def cells_reading() -> str:
    """JS: a function counting the table's cells whose text is exactly `v`."""
    return "(v => [...document.querySelectorAll('[role=gridcell]')].filter(c => c.innerText.trim() === v).length)"


def figure_3_from_medians(browser, pid: str, kids: list) -> None:
    """The report's Figure 3 is shown, and drawn (its data, read from the figure the report draws
    from the store: rlbench/report/figures.py actor_scaling) through each configuration's median
    runtime_s, normalised to the fewest actors' median, with its min..max as a bar."""
    browser.wait_for(
        "[...document.images].some(i => i.alt === 'fig3_actor_scaling' && i.complete && i.naturalWidth > 0)",
        frames=True,
        what="Figure 3 drawn in the report",
    )
    browser.evaluate_in_frames(
        "scrollTo(0, document.querySelector('img[alt=fig3_actor_scaling]').getBoundingClientRect().top + scrollY - 200)"
    )
    runtimes = {a: [k.data.metrics["runtime_s"] for k in kids if k.data.params["actors"] == str(a)] for a in (2, 4)}
    base = statistics.median(runtimes[2])
    want = [(a, statistics.median(r) / base, min(r) / base, max(r) / base) for a, r in runtimes.items()]
    fig = actor_scaling(load_parent(pid)).fig
    line = next(x for ax in fig.axes for x in ax.get_lines() if x.get_gid() == "runtime_s|all jobs")
    (bars,) = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "runtime_s|all jobs|range"]
    drawn = [
        (x, y, seg[0][1], seg[1][1])
        for x, y, seg in zip(line.get_xdata(), line.get_ydata(), bars.get_segments(), strict=True)
    ]
    flat = [float(v) for point in drawn for v in point]  # pytest 9's approx compares flat sequences only
    assert flat == pytest.approx([float(v) for point in want for v in point], rel=1e-4), (drawn, want)


def search_page(browser, run_page: str, search) -> None:
    """The search parent's page (rlbench/searches/parent.py search_note): its links above the
    description's fold (the trials' runs view and charts, the Pareto or history figure, trials.csv), each
    to its place, and its jobs table: a row per trial, linked to the trial's run."""
    sid = search.info.run_id
    browser.navigate(run_page.format(sid))
    browser.wait_for(
        "document.body && /Description\\s+rlbench search/.test(document.body.innerText)",
        what="a description starting with 'rlbench search'",
    )
    view, artifact = f"runs?viewStateShareKey=rlbench-{sid}&workflowType=machine_learning", f"/runs/{sid}/artifactPath/"
    front = (
        ("Pareto front", "pareto_front.png")
        if "," in search.data.tags["objectives"]
        else ("Optimisation history", "optimisation_history.png")
    )  # one objective: no front to link
    want = {
        "Jobs table": view,
        "Charts": f"{view}&compareRunsMode=CHART",
        front[0]: f"{artifact}{front[1]}?workflowType=machine_learning",
        "trials.csv": f"{artifact}trials.csv?workflowType=machine_learning",
    }
    hrefs = {}
    for link, target in want.items():
        hrefs[link] = browser.wait_for(
            f"[...document.querySelectorAll('a')].find(a => a.textContent === {json.dumps(link)})?.href",
            what=f"the search's '{link}' link",
        )
        assert hrefs[link].endswith(target), (link, hrefs[link])
    (trial,) = mlflow.search_runs(
        [search.info.experiment_id], output_format="list", filter_string=f"tags.mlflow.parentRunId = '{sid}'"
    )
    opened = click_every_link(browser, run_page.format(sid), "the search parent's")  # folded: the first links
    assert sorted(opened) == sorted(
        ["#" + hrefs[k].split("#", 1)[1] for k in want]
        + [f"#/experiments/{trial.info.experiment_id}/runs/{trial.info.run_id}?workflowType=machine_learning"]
    ), opened
    browser.navigate(run_page.format(sid))
    rows = browser.wait_for(f"({trial_cells()}).length > 0 && ({trial_cells()})", what="the jobs table's rows")
    assert [(t.split(":")[0], f"/runs/{trial.info.run_id}?" in href) for t, href in rows] == [("trial 0", True)], rows
    browser.evaluate("document.querySelector('button[aria-label=\"Expand description\"]')?.click()")  # Show more
    browser.wait_for_text("bound")  # the table's last column, unfolded
    browser.screenshot(SHOTS / "7_search_parent.png")
    browser.navigate(hrefs[front[0]])
    browser.wait_for(
        "[...document.images].some(i => i.complete && i.naturalWidth > 0)",
        what=f"the {front[0]} figure drawn in the artifact viewer",
    )
    browser.screenshot(SHOTS / "7b_search_pareto.png")


def trial_cells() -> str:
    """JS: [text, link] of the first cell of each row of the description's jobs table (its header `job`),
    its non-breaking spaces read as spaces (parent_note.table_row)."""
    return (
        "[...document.querySelectorAll('table')].filter(t => t.querySelector('th')?.innerText.trim() === 'job')"
        ".flatMap(t => [...t.querySelectorAll('tbody tr')]).map(r => "
        "[r.cells[0].innerText.replace(/\\u00a0/g, ' ').trim(),"
        " r.cells[0].querySelector('a')?.href || ''])"
    )
