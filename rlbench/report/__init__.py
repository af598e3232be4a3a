"""rlbench report: the study's figures and a verdict from the MLflow record of a sweep or search.

    python -m rlbench.report --sweep <parent run id>      # a sweep's or a search's parent
    python -m rlbench.report --study <optuna study name>  # a search, by its study name
    python -m rlbench.report --experiment <name>          # every job of an experiment

Library use (notebooks): `load_parent` / `load_experiment` -> `Study`; `all_figures(study)`;
`findings(study)`; `build_report(study, out_dir)` writes everything `rlbench report` writes.
"""

from rlbench.report.build import build_report
from rlbench.report.figures import all_figures
from rlbench.report.findings import findings, verdict_lines
from rlbench.tracking.study_records import Study, load_experiment, load_parent

__all__ = ["Study", "all_figures", "build_report", "findings", "load_experiment", "load_parent", "verdict_lines"]
