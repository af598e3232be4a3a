"""The params a job records, pinned: one frozen typed config per job (issue 55) keeps every key and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import CARTPOLE_TINY, runs

PINNED = Path(__file__).parent / "data" / "job_params.json"
JOBS = {  # a CartPole job, a Pong smoke job with sm_limit and actor_threads, a V-trace one
    "cartpole": CARTPOLE_TINY,
    "pong_smoke": [
        "workload=smoke",
        "workload.frames=400",
        "workload.learner_updates=0",
        "actors=2",
        "actor_threads=1",
        "sm_limit=1",
    ],
    "vtrace": [
        "env=cartpole",
        "algo=vtrace_vector",
        "workload=smoke",
        "actors=4",
        "algo.batch_size=4",
        "workload.frames=2000",
        "workload.learner_updates=1",
    ],
}


def recorded(store: dict, name: str) -> dict:
    """The job's params, its tracking.* and overrides tags and its config.yaml, the test's folder as <tmp>."""
    import mlflow

    (run,) = runs(store["uri"])
    folder = str(store["db"].parent)
    tags = {k: v.replace(folder, "<tmp>") for k, v in run.data.tags.items() if k.startswith("tracking.")}
    overrides = run.data.tags["overrides"].replace(folder, "<tmp>")
    text = mlflow.artifacts.load_text(f"{run.info.artifact_uri}/config.yaml").replace(folder, "<tmp>")
    return {"params": run.data.params, "tags": tags, "overrides": overrides, "config.yaml": text}


@pytest.mark.e2e  # the record as the store holds it after the command's own entry: no fake gives that
@pytest.mark.parametrize("name", list(JOBS))
def test_a_jobs_record_keeps_its_params_keys_and_values(name, store, rlbench_main):
    done = rlbench_main([*JOBS[name], *store["overrides"]])
    assert done.returncode == 0, done.stderr
    got = recorded(store, name)
    want = json.loads(PINNED.read_text())[name]
    assert got["params"] == want["params"]
    assert got["tags"] == want["tags"]
    assert got["overrides"] == want["overrides"]
    assert got["config.yaml"] == want["config.yaml"]
