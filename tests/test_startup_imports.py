"""What a job's start imports (docs/testing.md, "What a job imports"): opening its MLflow run
loads no IPython, and the run still carries MLflow's user and source tags."""

from __future__ import annotations

import json
import subprocess
import sys

import mlflow

from tests.conftest import ROOT

OPEN_A_RECORD = """
import json, sys
from rlbench.prepare.compose import compose_config
from rlbench.prepare.validate import validate
from rlbench.tracking.record import JobRecord
cfg = compose_config(sys.argv[1:])
with JobRecord(cfg, validate(cfg).tracking, [], None) as record:
    pass
print(json.dumps({"run_id": record.run_id, "ipython": "IPython" in sys.modules}))
"""


def test_opening_a_jobs_run_imports_no_ipython_and_keeps_mlflows_source_tags(store):
    overrides = [o for o in store["overrides"] if not o.startswith("hydra.")]
    p = subprocess.run([sys.executable, "-c", OPEN_A_RECORD, *overrides], check=False, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ipython"] is False
    mlflow.set_tracking_uri(store["uri"])
    run = mlflow.get_run(out["run_id"])
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["mlflow.user"] and tags["mlflow.source.name"] == "rlbench job" and tags["mlflow.runName"]
