"""Write a study's report: one PNG per figure, findings.json, and the self-contained report.html
(docs/metrics.md, "Report artifacts")."""

from __future__ import annotations

import json
from pathlib import Path

from rlbench.report.figures import all_figures
from rlbench.report.findings import findings_of, study_result, verdict_lines
from rlbench.report.html import png_bytes, render
from rlbench.report.packing import packing, packing_verdict
from rlbench.report.prediction import prediction_section
from rlbench.tracking.study_records import Study


def build_report(study: Study, out_dir: Path, knee_share: float = 0.10, tolerance: float = 0.05) -> dict:
    """Returns {"html": path, "figures": {name: path}, "not_drawn": {name: reason},
    "findings": dict, "lines": [verdict sentences], "result": the Result}. The study's Result is
    computed once, here; findings.json, the lines, the page and the figures render it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = study_result(study, knee_share, tolerance)
    found = findings_of(study, result)
    predicted, found["prediction"] = prediction_section(study)
    lines = verdict_lines(found) + packing_verdict(study)
    drawn = all_figures(study, result.verdict) + [packing(study), predicted]
    pngs, paths = {}, {}
    for d in drawn:
        if d.fig is not None:
            pngs[d.name] = png_bytes(d.fig)
            paths[d.name] = out_dir / f"{d.name}.png"
            paths[d.name].write_bytes(pngs[d.name])
    not_drawn = {d.name: d.note for d in drawn if d.fig is None}
    (out_dir / "findings.json").write_text(json.dumps(found | {"not_drawn": not_drawn}, indent=2, default=str))
    page = out_dir / "report.html"
    page.write_text(render(study, drawn, pngs, found, lines))
    return {"html": page, "figures": paths, "not_drawn": not_drawn, "findings": found, "lines": lines, "result": result}
