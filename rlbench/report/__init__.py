"""rlbench report: the study's figures and a verdict from the MLflow record of a sweep or search.

`python -m rlbench.report --sweep <parent run id> | --study <name> | --experiment <name>`;
in a notebook: `load_parent` / `load_experiment` -> `Study`, `all_figures(study)`,
`findings(study)`, `build_report(study, out_dir)`. docs/metrics.md, "Report artifacts".
"""

from rlbench.report.build import build_report
from rlbench.report.figures import all_figures
from rlbench.report.findings import findings, verdict_lines
from rlbench.tracking.study_records import Study, load_experiment, load_parent

__all__ = ["Study", "all_figures", "build_report", "findings", "load_experiment", "load_parent", "verdict_lines"]
