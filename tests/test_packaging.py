"""What a non-editable install carries. An actor host (`pip install .` or a wheel, then
`rlbench-actor --server ...`) composes its env from the configs in the package; until the
wheel carried conf/, every installed command failed with FileNotFoundError on
site-packages/conf (seen on the H100 host of the device tool). Only building the wheel shows
what it carries, so this is end to end."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


def _built_and_installed(tmp_path: Path) -> Path:
    """The wheel of a copy of this clone (building in the clone would leave build/ there),
    installed alone into a folder; that folder."""
    src = tmp_path / "src"
    for name in ("rlbench", "hydra_plugins", "conf"):
        shutil.copytree(
            ROOT / name, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    assert (src / "rlbench" / "conf").is_symlink()  # the link the wheel resolves into a copy
    run = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*run, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "wheel"), str(src)],
        check=True,
        cwd=tmp_path,
    )
    (wheel,) = (tmp_path / "wheel").glob("rlbench-*.whl")
    site = tmp_path / "site"
    subprocess.run([*run, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, cwd=tmp_path)
    return site


def test_an_installed_wheel_composes_a_job_and_an_actor_outside_the_clone(tmp_path):
    site = _built_and_installed(tmp_path)
    assert not (site / "rlbench" / "conf").is_symlink() and (site / "rlbench" / "conf" / "config.yaml").is_file()
    (dist,) = importlib.metadata.distributions(path=[str(site)])  # the plugins MLflow finds in an install
    assert {(e.group, e.name): e.value for e in dist.entry_points if e.group.startswith("mlflow.")} == {
        ("mlflow.app", "rlbench"): "rlbench.tracking.ui_app:create_app",  # mlflow ui --app-name rlbench
        ("mlflow.artifact_repository", "rlbench-store"): "rlbench.tracking.artifacts:StoreRelativeArtifactRepository",
    }
    assert (site / "rlbench" / "tracking" / "group_rows.js").is_file()  # the UI app's script (tracking/ui_app.py)
    probe = (
        "import rlbench; from rlbench.prepare.compose import CONF_DIR, compose_job; "
        "c = compose_job(['env=pong', 'actors=8'], host=False); "
        "print(rlbench.__file__, CONF_DIR, c.env.id, c.actors)"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run(
        [sys.executable, "-c", probe], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    module, conf_dir, game, actors = out.stdout.split()
    assert module.startswith(str(site)) and conf_dir == str(site / "rlbench" / "conf")  # the wheel's, not the clone's
    assert (game, actors) == ("pong", "8")
    # the actor's command line composes the same way (a bad override is refused by name, exit 2)
    bad = subprocess.run(
        [sys.executable, "-m", "rlbench.actor", "--server", "127.0.0.1:1", "--envs", "2", "env=pong", "env.nope=1"],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "env.nope" in bad.stderr, bad.stderr[-2000:]
