"""`mlflow ui --app-name rlbench` (the `mlflow.app` entry point in pyproject.toml): MLflow's own UI
whose index page first stores "Model training" as the view of a browser that has chosen none (so
MLflow's own links, which carry no `workflowType`, open there too; a choice made on the switch
stays), keeps a shared view across a reload and Back, and rounds a sweep's group rows and shows
their verdict. What MLflow 3.17 decides and what not: docs/metrics.md, "In the MLflow UI".
"""

from __future__ import annotations

import json
from pathlib import Path

from flask import Response

from rlbench.tracking.views import HEADLINE, NOT_MEASURED, REPEAT_GROUP, VERDICT_TAG

APP_NAME = "rlbench"  # the entry point's name (pyproject.toml): `mlflow ui --app-name rlbench`
VIEW_KEY = "mlflow.workflowType_v1"  # the UI's useLocalStorage key "mlflow.workflowType", version 1
MODEL_TRAINING = "machine_learning"  # the switch's value for "Model training" (GenAI: "genai")


def seed_script(key: str = VIEW_KEY, view: str = MODEL_TRAINING) -> str:
    """A script that stores `view` under `key` in a browser whose localStorage has nothing there
    (a browser without localStorage, such as a sandboxed frame, is left alone)."""
    k, v = json.dumps(key), json.dumps(json.dumps(view))  # the UI stores the JSON of the value
    return (
        f"<script>try {{ if (localStorage.getItem({k}) === null) localStorage.setItem({k}, {v}) }} "
        f"catch (e) {{}}</script>"
    )


# The runs page's search facets: MLflow 3.17 writes them into the address after it applied a shared
# view, and skips a shared view whose address already holds one (its useSharedExperimentViewState).
FACETS = (
    "searchFilter",
    "orderByKey",
    "orderByAsc",
    "startTime",
    "lifecycleFilter",
    "modelVersionFilter",
    "datasetsFilter",
)
SHARE_PARAM = "viewStateShareKey"


def keep_shared_view_script(facets: tuple[str, ...] = FACETS, share: str = SHARE_PARAM) -> str:
    """A script that lets a shared view survive a reload and Back: where the address names a shared
    view beside the facets MLflow wrote there, it drops those facets before the bundle (or, on Back,
    its router) reads the address, so MLflow applies the view again. Back within one runs page
    (the page stays, the view is not applied twice) keeps the address as it is."""
    return (
        "<script>(function () { try {"
        f" var F = {json.dumps(list(facets))}, K = {json.dumps(share)};"
        " function path(h) { var q = h.indexOf('?'); return q < 0 ? h : h.slice(0, q); }"
        " var shown = path(location.hash);"
        " function strip() { var h = location.hash, q = h.indexOf('?'); if (q < 0) return;"
        " var p = new URLSearchParams(h.slice(q + 1)); if (!p.get(K)) return; var cut = false;"
        " F.forEach(function (k) { if (p.has(k)) { p.delete(k); cut = true; } });"
        " if (cut) history.replaceState(history.state, '', location.pathname + location.search + "
        "h.slice(0, q + 1) + p); }"
        " strip();"
        " window.addEventListener('popstate', function () { if (path(location.hash) !== shown) strip();"
        " shown = path(location.hash); });"
        " ['pushState', 'replaceState'].forEach(function (m) { var f = history[m];"
        " history[m] = function () { var r = f.apply(this, arguments); shown = path(location.hash); return r; }; });"
        " } catch (e) {} })();</script>"
    )


# A grouped runs table's group row (MLflow 3.17): the row `row-id` `tag.<tag>.<value>` (its runs:
# `<that>.<run id>`), each metric cell `<value> <span>(average)</span>` (its aggregate renderer)
GROUP_ROW, RUN_ID, AGGREGATES = "tag.{}.", "[0-9a-f]{32}", ("average", "min", "max")
RUNS_SEARCH = "ajax-api/2.0/mlflow/runs/search"  # MLflow's REST route, relative to the page
DIGITS = 6  # significant digits, as tracking/record.py SIGNIFICANT_DIGITS logs values (the tests check)


def group_rows_script(group: str = REPEAT_GROUP, verdict: str = VERDICT_TAG, share: str = SHARE_PARAM) -> str:
    """A script that, on a sweep's shared view (`rlbench-<parent run id>`) grouped by `group`, shows
    in each group row the median of its finished runs' values, `<median> (median of n)`, to 6
    significant digits (as the runs' values are logged; MLflow 3.17 aggregates by average, min or
    max only, and the terminal, the note and the report give medians) and, in its `verdict` cell,
    its runs' verdict (one per configuration), both read once from the sweep's runs; and on any
    runs table, a headline metric's `not measured: <reasons>` tag cell as `not measured`, its
    reasons on hover."""
    js = Path(__file__).with_name("group_rows.js").read_text(encoding="utf-8")
    consts = {
        "GROUP": GROUP_ROW.format(group),
        "TAG": group,
        "VERDICT": verdict,
        "SHARE": share,
        "RUN": RUN_ID,
        "AGG": list(AGGREGATES),
        "SEARCH": RUNS_SEARCH,
        "DIGITS": DIGITS,
        "UNMEASURED": list(HEADLINE),
        "MARK": NOT_MEASURED,
    }
    head = "".join(f"var {k} = {json.dumps(v)};" for k, v in consts.items())
    return f"<script>(function () {{ try {{ {head}\n{js} }} catch (e) {{}} }})();</script>"


def with_seed(index_html: str) -> str:
    """MLflow's index.html with the seed script, keep_shared_view_script and group_rows_script first
    in its <head>: they run before the bundle (a deferred script) reads the choice and the address."""
    head = index_html.find("<head>")
    if head < 0:
        raise ValueError("MLflow's index.html has no <head>: this MLflow's page is not the one rlbench's UI app knows")
    cut = head + len("<head>")
    scripts = seed_script() + keep_shared_view_script() + group_rows_script()
    return index_html[:cut] + scripts + index_html[cut:]


def seed_index(app) -> None:
    """Replace the Flask app's index view (endpoint `serve`) by one serving the seeded page;
    without a built UI (a source install of MLflow) MLflow's own view answers."""
    original = app.view_functions["serve"]
    index = Path(app.static_folder) / "index.html"

    def serve():
        if not index.is_file():
            return original()
        return Response(with_seed(index.read_text(encoding="utf-8")), mimetype="text/html")

    app.view_functions["serve"] = serve


def create_app(app=None):
    """The `mlflow.app` factory `rlbench`: MLflow's Flask app with its index page seeded, wrapped
    in MLflow's FastAPI app where uvicorn serves it (`mlflow ui`'s default), as basic-auth does."""
    from mlflow.environment_variables import _MLFLOW_SGI_NAME  # mlflow: only the UI loads it, not store.py's APP_NAME
    from mlflow.server import app as mlflow_app  # mlflow: builds MLflow's Flask app, for the UI alone

    app = mlflow_app if app is None else app
    seed_index(app)
    if _MLFLOW_SGI_NAME.get() == "uvicorn":
        from mlflow.server.fastapi_app import create_fastapi_app  # mlflow: the uvicorn app, for the UI alone

        return create_fastapi_app(app)
    return app
