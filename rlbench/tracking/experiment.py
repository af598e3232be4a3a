"""The experiment a sweep or a search records into: what they take from tracking, in one object.

`Experiment(tracking)` opens it (not where its artifacts cannot be written: `unwritable`) and
offers stale runs closed, the FINISHED runs, a resumed sweep's parent, a free run name, a parent
run, the runs table's view and run tags. Sweep and search take it as `store=` (tests: a fake).
"""

from __future__ import annotations

import mlflow

from rlbench.config.schema import TrackingConfig
from rlbench.tracking.parent import ParentRun, open_parent
from rlbench.tracking.readers import RunRecord, experiment_runs, study_parent, sweep_parent, trial_numbers
from rlbench.tracking.store import artifact_problem, mark_stale_runs, open_experiment, unique_top_level_name
from rlbench.tracking.views import runs_view


class Experiment:
    def __init__(self, tracking: TrackingConfig):
        """`unwritable`: why the experiment's artifacts cannot be written (the experiment is then
        not opened: the command refuses before any run), or None."""
        self.tracking = tracking
        self.unwritable = artifact_problem(tracking)
        self.id = None if self.unwritable else open_experiment(tracking)

    def mark_stale_runs(self) -> list[str]:
        """Runs left RUNNING by a process that is gone, in every experiment of the store, closed
        (KILLED, or FAILED by the heartbeat rule: tracking/orphans.py); returns their ids."""
        return mark_stale_runs(self.tracking)

    def trial_numbers(self, run_ids: list[str], study: str) -> set[int]:
        """The trial numbers of those runs that are trials of the Optuna study `study`."""
        return trial_numbers(run_ids, study)

    def finished_runs(self) -> list[RunRecord]:
        return experiment_runs(self.tracking.experiment, status="FINISHED")

    def unique_name(self, name: str) -> str:
        """`name`, or `name #k` when other top-level runs of the experiment use it."""
        return unique_top_level_name(self.id, name)

    def open_parent(self, name: str, command: str, tags: dict[str, str], params: dict | None = None) -> ParentRun:
        return open_parent(self.id, name, command, tags, params)

    def sweep_parent(self, key: str) -> ParentRun | None:
        """The ended parent of the sweep `key` (rlbench/sweeps/sweep.py sweep_key) in this experiment, if any."""
        found = sweep_parent(key, self.id)
        return None if found is None else ParentRun(found.run_id, found.experiment_id, found.name)

    def study_parent(self, study: str) -> ParentRun | None:
        """The parent run of the search over the Optuna study `study` in this experiment, if any."""
        found = study_parent(study, self.id)
        return None if found is None else ParentRun(found.run_id, found.experiment_id, found.name)

    def share_runs_view(
        self,
        parent_id: str,
        knobs: list[str],
        measured: set[str],
        group_by_tag: str | None = None,
        tags: tuple[str, ...] = (),
    ) -> str:
        """The runs table's view of the parent's children (its knobs and headline numbers, then the
        tag columns `tags`; grouped by the tag `group_by_tag` if given); its key."""
        return runs_view(self.id, parent_id, knobs, measured, group_by_tag, tags)

    def tag_runs(self, tags: dict[str, dict[str, str]]) -> None:
        """Set tags on runs: run id -> {tag: value} (a sweep's verdict on its jobs)."""
        client = mlflow.MlflowClient()
        for run_id, values in tags.items():
            for key, value in values.items():
                client.set_tag(run_id, key, value)
