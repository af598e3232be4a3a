"""A parent run's life, the one a sweep and a search share: opened RUNNING, written, ended.

`open_parent` / `parent_run` (a new or an existing parent), `ParentRun` (its writes; `end`:
FINISHED, FAILED or KILLED; `reopen`), and `live(parent, body, close)`, which records what the
command shows and ends the parent with a truthful status whatever happens. docs/metrics.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import mlflow
from mlflow.entities import Metric

from rlbench.core.signals import note_record
from rlbench.tracking.fingerprint import host_tags
from rlbench.tracking.orphans import owner_tags
from rlbench.tracking.readers import read_run
from rlbench.tracking.record import created_meanwhile, rounded, source_tags

NOTE_TAG = "mlflow.note.content"  # MLflow's description of a run
SWEEP_KEY = "sweep_key"  # what a sweep is (rlbench/sweeps/sweep.py sweep_key): a resumed sweep continues its parent


class ParentRun:
    """A run rlbench writes that is not a job's: a sweep's or a search's parent, a report's run."""

    def __init__(self, run_id: str, experiment_id: str, name: str):
        self.run_id, self.experiment_id, self.name = run_id, experiment_id, name
        self._client = mlflow.MlflowClient()

    def log_params(self, params: dict) -> None:
        for key, value in params.items():
            self._client.log_param(self.run_id, key, value)

    def set_tags(self, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self._set_tag(key, value)

    def _set_tag(self, key: str, value: str) -> None:
        """Two writers of one parent (a search's workers closing the study together) can both
        create a tag: the server inserts it twice and the second insert fails on the tag's key
        (PostgreSQL's UniqueViolation). The tag exists then, and writing it again updates it."""
        try:
            self._client.set_tag(self.run_id, key, value)
        except mlflow.exceptions.MlflowException as e:
            if not created_meanwhile(e):
                raise
            self._client.set_tag(self.run_id, key, value)

    def tags(self) -> dict[str, str]:
        """Its tags as the store has them now."""
        return read_run(self.run_id).tags

    def describe(self, text: str) -> None:
        """Its description (MLflow's note, markdown)."""
        self._set_tag(NOTE_TAG, text)

    def description(self) -> str | None:
        return self.tags().get(NOTE_TAG)

    def log_metrics(self, metrics: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        self._client.log_batch(
            self.run_id, metrics=[Metric(k, rounded(v), now, 0) for k, v in metrics.items()]
        )  # as a job's

    def log_text(self, text: str, path: str) -> None:
        self._client.log_text(self.run_id, text, path)

    def log_table(self, columns: dict[str, list], path: str) -> None:
        """A table (column name -> values) as MLflow's JSON table `path` (readers.logged_table reads it)."""
        self._client.log_table(self.run_id, data=columns, artifact_file=path)

    def log_file(self, path: Path) -> None:
        self._client.log_artifact(self.run_id, str(path))

    def log_folder(self, folder: Path, under: str) -> None:
        """Every file in `folder`, as artifacts under `under/`."""
        self._client.log_artifacts(self.run_id, str(folder), under)

    def reopen(self) -> None:
        """RUNNING again, owned by this process: a resumed study's or sweep's parent."""
        self.set_tags(owner_tags())
        self._client.update_run(self.run_id, status="RUNNING")

    def end(self, status: str) -> None:
        """FINISHED, FAILED or KILLED."""
        self._client.set_terminated(self.run_id, status)


def open_parent(
    experiment_id: str, name: str, command: str, tags: dict[str, str], params: dict | None = None
) -> ParentRun:
    """A new parent run, RUNNING, with the host's and the source's tags (`command`: sweep, search, report)."""
    run = mlflow.MlflowClient().create_run(
        experiment_id, run_name=name, tags={**host_tags(), **source_tags(command), **owner_tags(), **tags}
    )
    parent = ParentRun(run.info.run_id, experiment_id, name)
    parent.log_params(params or {})
    return parent


def parent_run(run_id: str) -> ParentRun:
    """The run `run_id` to write on; readers.NoSuchRun when the store has none."""
    record = read_run(run_id)
    return ParentRun(record.run_id, record.experiment_id, record.name)


def live(parent, body: Callable[[], str], close: Callable[[str], None], what: str = "parent run") -> str:
    """A parent's life once opened: `body()` runs the jobs and returns the status they earned
    (FINISHED, or FAILED when one failed); the status is KILLED when it is interrupted (Ctrl-C,
    SIGTERM: a KeyboardInterrupt, which notes that `what` ended KILLED: rlbench/core/signals.py) and
    FAILED when it raises anything else, and the exception goes on. Whatever happened,
    `close(status)` records what the command shows on the parent (summary, description,
    report), and the parent ends with the status. Returns the status."""
    status = "FAILED"
    try:
        status = body()
    except KeyboardInterrupt as e:
        status = "KILLED"
        note_record(e, what, parent.run_id, status)
        raise
    finally:
        try:
            close(status)
        finally:
            parent.end(status)
    return status
