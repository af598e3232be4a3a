"""Fakes of the tracking port (rlbench/tracking/) for sweep and search tests with no store:
they keep what is written and answer what is asked. tests/test_sweep_logic.py checks that they
offer what the real port offers (the same public methods and parameters)."""

from __future__ import annotations

from pathlib import Path


class FakeParent:
    """tracking.parent.ParentRun's offer, kept in memory; `statuses`: RUNNING (reopen) and the end."""

    def __init__(
        self, run_id: str = "p" * 32, experiment_id: str = "7", name: str = "parent", tags: dict | None = None
    ):
        self.run_id, self.experiment_id, self.name = run_id, experiment_id, name
        self.params, self._tags, self.metrics = {}, dict(tags or {}), {}
        self.texts, self.tables, self.files, self.statuses = {}, {}, [], []
        self.note: str | None = None

    def log_params(self, params: dict) -> None:
        self.params |= params

    def set_tags(self, tags: dict[str, str]) -> None:
        self._tags |= tags

    def tags(self) -> dict[str, str]:
        return dict(self._tags)

    def describe(self, text: str) -> None:
        self.note = text

    def description(self) -> str | None:
        return self.note

    def log_metrics(self, metrics: dict[str, float]) -> None:
        self.metrics |= metrics

    def log_text(self, text: str, path: str) -> None:
        self.texts[path] = text

    def log_table(self, columns: dict[str, list], path: str) -> None:
        self.tables[path] = columns

    def log_file(self, path: Path) -> None:
        self.files.append(Path(path).name)

    def log_folder(self, folder: Path, under: str) -> None:
        self.files += [f"{under}/{p.name}" for p in sorted(Path(folder).iterdir())]

    def reopen(self) -> None:
        self.statuses.append("RUNNING")

    def end(self, status: str) -> None:
        self.statuses.append(status)


class FakeExperiment:
    """tracking.experiment.Experiment's offer: `finished` are its FINISHED runs, `found` the
    parents of studies (by study name) and of ended sweeps (by sweep key) it has; `unwritable`
    why its artifacts cannot be written; `opened` keeps (command, parent) of every parent it opens.
    Give a sweep or a search `store=fake.open`."""

    def __init__(
        self,
        finished: list | None = None,
        found: dict | None = None,
        taken: set[str] = frozenset(),
        view_error: Exception | None = None,
        unwritable: str | None = None,
        gone: dict | None = None,
    ):
        self.id, self.tracking, self.unwritable = "7", None, unwritable
        self.gone = dict(gone or {})  # run id -> (study, trial number) of runs a gone process left RUNNING
        self.finished, self.found, self.taken, self.view_error = (
            list(finished or []),
            dict(found or {}),
            taken,
            view_error,
        )
        self.opened, self.views, self.stale_marked = [], [], 0
        self.run_tags: dict[str, dict[str, str]] = {}  # run id -> the tags tag_runs set on it

    def open(self, tracking):
        self.tracking = tracking
        return self

    def mark_stale_runs(self) -> list[str]:
        self.stale_marked += 1
        return list(self.gone)

    def trial_numbers(self, run_ids: list[str], study: str) -> set[int]:
        """The product's filter (readers.study_trials) over the tags these runs would have."""
        from rlbench.tracking.readers import study_trials

        tags = [
            {"optuna_study": s, "optuna_trial": str(n)} for r in run_ids if r in self.gone for s, n in [self.gone[r]]
        ]
        return study_trials(tags, study)

    def finished_runs(self) -> list:
        return self.finished

    def unique_name(self, name: str) -> str:
        return f"{name} #2" if name in self.taken else name

    def open_parent(self, name: str, command: str, tags: dict[str, str], params: dict | None = None) -> FakeParent:
        parent = FakeParent(run_id=f"{len(self.opened):032d}", experiment_id=self.id, name=name, tags=tags)
        parent.log_params(params or {})
        self.opened.append((command, parent))
        return parent

    def sweep_parent(self, key: str) -> FakeParent | None:
        return self.found.get(key)

    def study_parent(self, study: str) -> FakeParent | None:
        return self.found.get(study)

    def share_runs_view(
        self,
        parent_id: str,
        knobs: list[str],
        measured: set[str],
        group_by_tag: str | None = None,
        tags: tuple[str, ...] = (),
    ) -> str:
        if self.view_error is not None:
            raise self.view_error
        self.views.append((parent_id, knobs, measured, group_by_tag, tags))
        return f"rlbench-{parent_id}"

    def tag_runs(self, tags: dict[str, dict[str, str]]) -> None:
        for run_id, values in tags.items():
            self.run_tags.setdefault(run_id, {}).update(values)
