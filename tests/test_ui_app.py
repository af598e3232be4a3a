"""rlbench's `mlflow.app` (rlbench/tracking/ui_app.py): MLflow's index page with the script that
records "Model training" for a browser that never chose a view, the key it writes being the one
the installed MLflow's bundle reads, and the entry point `mlflow ui --app-name rlbench` finds.
The browser test (tests/test_browser.py) follows MLflow's own links in headless Chromium."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from rlbench.tracking.record import SIGNIFICANT_DIGITS, rounded
from rlbench.tracking.ui_app import (
    APP_NAME,
    FACETS,
    GROUP_ROW,
    MODEL_TRAINING,
    SHARE_PARAM,
    VIEW_KEY,
    create_app,
    group_rows_script,
    keep_shared_view_script,
    seed_script,
    with_seed,
)
from tests.conftest import ROOT, _unavailable

MLFLOW_INDEX = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"/><script defer="defer" src="main.js"></script>'
)


def mlflow_build() -> Path:
    import mlflow

    return Path(mlflow.__file__).parent / "server" / "js" / "build"


def test_the_seed_goes_first_in_the_head_and_writes_only_where_nothing_was_chosen():
    script = seed_script()
    before, after = MLFLOW_INDEX.split("<head>")
    scripts = f"{script}{keep_shared_view_script()}{group_rows_script()}"
    assert with_seed(MLFLOW_INDEX) == f"{before}<head>{scripts}{after}"  # before the bundle
    assert f"if (localStorage.getItem({json.dumps(VIEW_KEY)}) === null)" in script  # a user's choice stays
    stored = re.search(r"setItem\(\"[^\"]+\", (\".*?\")\)", script).group(1)
    assert json.loads(json.loads(stored)) == MODEL_TRAINING  # the JSON of the value, as the UI's hook stores it


def test_the_shared_view_script_goes_before_the_bundle_and_names_the_facets_it_drops():
    page = with_seed(MLFLOW_INDEX)
    assert page.index(keep_shared_view_script()) < page.index('<script defer="defer"')
    assert (
        json.dumps(list(FACETS)) in keep_shared_view_script() and json.dumps(SHARE_PARAM) in keep_shared_view_script()
    )


def test_the_installed_mlflow_skips_a_shared_view_whose_address_holds_the_facets_the_script_drops():
    """What keep_shared_view_script relies on in MLflow's bundle: the runs page's facets are these
    seven keys (its useExperimentPageSearchFacets), the shared view's hook reads `viewStateShareKey`
    and returns without applying the view where the address holds any facet. A newer MLflow that
    changes one fails here (then look again at what survives a reload: docs/metrics.md)."""
    js = mlflow_build() / "static" / "js"
    bundle = "".join(p.read_text(encoding="utf-8") for p in js.glob("*.js"))
    assert json.dumps(list(FACETS), separators=(",", ":")) in bundle
    assert f'="{SHARE_PARAM}"' in bundle or f"?{SHARE_PARAM}=" in bundle
    assert re.search(r"if\(\$?\w+\.\w+\.some\(\w+=>\w+\.has\(\w+\)\)\)return void\(\w+\.current=null\)", bundle), (
        "the shared view's hook no longer skips an address holding facets"
    )


def test_the_group_rows_script_names_the_sweeps_group_tag_and_verdict_and_rounds_as_runs_are_logged():
    script = group_rows_script()
    assert script.startswith("<script>") and script.endswith("</script>") and script.count("</script>") == 1
    assert 'var GROUP = "tag.repeat_group.";' in script and 'var VERDICT = "verdict";' in script
    assert 'var SHARE = "viewStateShareKey";' in script and "/^rlbench-([0-9a-f]{32})$/" in script
    assert f"var DIGITS = {SIGNIFICANT_DIGITS};" in script  # as rlbench/tracking/record.py rounded logs values


@pytest.mark.browser
def test_the_group_rows_script_rounds_an_average_as_a_value_is_logged():
    """The script's rounding, in Chromium, against tracking/record.py rounded: 6 significant
    digits, integers exact, an exact tie to the even digit (1961.625: Python's 1961.62, where
    JavaScript's toPrecision gives 1961.63)."""
    try:
        from tests.cdp import Browser, chromium_path
    except ImportError as e:
        _unavailable(f"{e} (pip install -e '.[test]')")
    if chromium_path() is None:
        _unavailable("no chromium here (Debian: apt-get install chromium)")
    values = [48.315799999999996, 1961.625, -1961.625, 123456.5, 123457.5, 1234567.0, 0.1 + 0.2, 2103.0950000000003]
    body = (
        group_rows_script().removeprefix("<script>(function () { try { ").removesuffix(" } catch (e) {} })();</script>")
    )
    b = Browser()
    try:
        shown = b.evaluate(
            f"(function () {{ {body}\n return {json.dumps(values)}.map(x => rounded(x + ' (average)')); }})()"
        )
    finally:
        b.close()
    assert shown == [f"{int(r) if r.is_integer() else r} (average)" for r in map(rounded, values)]


def test_the_installed_mlflow_draws_group_rows_as_the_group_rows_script_reads_them():
    """What group_rows_script relies on in MLflow's bundle: a group row's id is `<mode>.<tag>.<value>`
    (`tag.repeat_group.actors=4`), its aggregate cells `<value> <span>(average)</span>`, the average
    a plain sum over the count (its float noise, 48.315799999999996, is what the script rounds)."""
    bundle = "".join(p.read_text(encoding="utf-8") for p in (mlflow_build() / "static" / "js").glob("*.js"))
    assert re.search(r"\(\{groupByData:(\w),mode:(\w),value:(\w)\}\)=>`\$\{\2\}\.\$\{\1\}\.\$\{\3\|\|null", bundle)
    assert GROUP_ROW.format("x") == "tag.x."
    assert re.search(r'children:\["\(",\w\.groupParentInfo\.aggregateFunction,"\)"\]', bundle)
    assert re.search(r"\w=>\w\.reduce\(\(\w,\w\)=>\w\+\w,0\)/\w\.length", bundle)


def test_a_page_without_head_is_refused_by_name():
    with pytest.raises(ValueError, match="no <head>"):
        with_seed("<html><body></body></html>")


def test_the_installed_mlflow_reads_the_key_the_seed_writes():
    """What the seed relies on in MLflow's bundle: the view's hook keeps the choice under
    useLocalStorage("mlflow.workflowType", version 1), stored as `<key>_v<version>`, and
    "machine_learning" is the Model training view. A newer MLflow that changes one fails here."""
    (main,) = (mlflow_build() / "static" / "js").glob("main.*.js")
    bundle = main.read_text(encoding="utf-8")
    key, version = VIEW_KEY.rsplit("_v", 1)
    assert f'key:"{key}",version:{version}' in bundle
    assert re.search(r"=\((\w),(\w)\)=>`\$\{\1\}_v\$\{\2\}`", bundle), "useLocalStorage no longer stores <key>_v<n>"
    assert f'MACHINE_LEARNING="{MODEL_TRAINING}"' in bundle
    index = (mlflow_build() / "index.html").read_text(encoding="utf-8")
    assert with_seed(index).index("<script>") < with_seed(index).index('<script defer="defer"')


def _flask_like_mlflow(static: Path):
    from flask import Flask

    app = Flask("mlflow-like", static_folder=str(static))
    app.add_url_rule("/", "serve", lambda: "no index.html")  # MLflow's endpoint name for its index page
    return app


def test_create_app_serves_the_seeded_index_and_the_original_without_one(tmp_path, monkeypatch):
    monkeypatch.delenv("_MLFLOW_SGI_NAME", raising=False)  # waitress / gunicorn: the Flask app itself
    (tmp_path / "index.html").write_text(MLFLOW_INDEX)
    app = _flask_like_mlflow(tmp_path)
    assert create_app(app) is app
    page = app.test_client().get("/")
    assert page.status_code == 200 and page.mimetype == "text/html" and page.text == with_seed(MLFLOW_INDEX)
    (tmp_path / "index.html").unlink()
    assert app.test_client().get("/").text == "no index.html"  # a source install of MLflow: its own answer


def test_under_uvicorn_create_app_returns_mlflows_fastapi_app_around_the_flask_app(tmp_path, monkeypatch):
    from fastapi import FastAPI

    monkeypatch.setenv("_MLFLOW_SGI_NAME", "uvicorn")  # what `mlflow ui` exports to its workers by default
    flask_app = _flask_like_mlflow(tmp_path)
    served = create_app(flask_app)
    assert isinstance(served, FastAPI)
    assert served.routes[-1].app.app is flask_app  # mounted at "/", behind MLflow's own FastAPI routes


def test_pyproject_registers_the_app_under_the_name_the_ui_command_uses():
    from rlbench.tracking.store import ui_command

    apps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["mlflow.app"]
    assert apps == {APP_NAME: "rlbench.tracking.ui_app:create_app"}
    assert (
        ui_command("sqlite:///mlruns/mlflow.db")
        == "mlflow ui --app-name rlbench --backend-store-uri sqlite:///mlruns/mlflow.db"
    )
