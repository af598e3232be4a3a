"""One self-contained HTML file: figures inlined as base64 PNG, the verdict, the job table."""

from __future__ import annotations

import base64
import html
import io

from rlbench.report.figures import Drawn
from rlbench.report.records import JobRun, Study
from rlbench.tracking.unmeasured import explain

COLUMNS = (("actors", "actors"), ("actor threads", "actor_threads_used"), ("units granted", "sm_granted"),
           ("CPU/GPU ratio", "cpu_gpu_ratio"), ("fps (env frames/s)", "fps"), ("runtime (s)", "runtime_s"),
           ("sim share", "sim_share"), ("learner share", "learner_share"),
           ("energy per task (J)", "energy_per_task_j"), ("perf/W", "perf_per_watt"),
           ("GPU power avg (W)", "power_gpu_w_avg"), ("GPU busy", "gpu_busy_frac"), ("NVML util", "gpu_util_avg"),
           ("greedy eval return (last 20)", "eval_return_mean20"))

STYLE = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td:first-child,th:first-child{text-align:left}.bad{background:#fdd}.na{color:#999}img{max-width:100%}
li.warn{color:#a00}"""


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _cell(job: JobRun, key: str) -> str:
    v = job.knob(key)
    if v is None:
        return f'<td class="na" title="{html.escape(job.why_missing(key))}">n/a</td>'
    return f"<td>{v:.4g}</td>" if isinstance(v, float) else f"<td>{v}</td>"


def job_table(study: Study, bounds: dict) -> str:
    head = "<tr><th>job</th><th>status</th>" + "".join(f"<th>{h}</th>" for h, _ in COLUMNS) + "<th>bound</th></tr>"
    rows = []
    for j in study.jobs:
        cls = "" if j.finished else ' class="bad"'
        status = j.status + (f": {html.escape(j.error)}" if j.error and not j.finished else "")
        bound = bounds.get(j.name, {}).get("kind", "-")
        rows.append(f"<tr{cls}><td>{html.escape(j.name)}</td><td>{status}</td>"
                    + "".join(_cell(j, k) for _, k in COLUMNS) + f"<td>{html.escape(bound)}</td></tr>")
    rows += [f'<tr class="bad"><td colspan="{len(COLUMNS) + 3}">MISSING: {html.escape(m)}</td></tr>'
             for m in study.missing]
    return f"<table>{head}{''.join(rows)}</table>"


CONFIG_COLUMNS = (("runtime (s)", "runtime_s"), ("task fps", "task_fps"), ("fps (env frames/s)", "fps"),
                  ("energy per task (J)", "energy_per_task_j"))


def config_table(configs: dict[str, dict]) -> str:
    """With repeats (findings' `configurations`): one row per configuration, each value the
    median of its finished runs with their range and count; empty when every one ran once."""
    if not any(v and v["n"] > 1 for c in configs.values() for v in c.values()):
        return ""

    def cell(v) -> str:
        if not v:
            return '<td class="na">n/a</td>'
        spread = f" ({v['low']:.4g}..{v['high']:.4g}, n={v['n']})" if v["n"] > 1 else ""
        return f"<td>{v['median']:.4g}{spread}</td>"

    head = "<tr><th>configuration</th>" + "".join(f"<th>{h}</th>" for h, _ in CONFIG_COLUMNS) + "</tr>"
    rows = [f"<tr><td>{html.escape(name)}</td>" + "".join(cell(c.get(k)) for _, k in CONFIG_COLUMNS) + "</tr>"
            for name, c in configs.items()]
    return (f"<h2>Configurations</h2><p>median (min..max, n) of each configuration's finished runs; the verdict "
            f"compares medians and calls no difference within the spread</p><table>{head}{''.join(rows)}</table>")


def not_measured(study: Study) -> str:
    """Each table column some finished job could not measure, with the distinct reasons."""
    items = []
    for head, key in COLUMNS:
        reasons = sorted({explain(key, j.nulls) or j.why_missing(key) for j in study.finished if j.knob(key) is None})
        items += [f"<li>{html.escape(head)} ({key}): {html.escape(r)}</li>" for r in reasons]
    return f"<p>n/a means not measured:</p><ul>{''.join(items)}</ul>" if items else ""


def render(study: Study, drawn: list[Drawn], pngs: dict[str, bytes], findings: dict, lines: list[str]) -> str:
    verdict = "".join(f'<li{" class=warn" if l.startswith(("NOT FINISHED", "MISSING")) else ""}>{html.escape(l)}</li>'
                      for l in lines)
    figures = []
    for d in drawn:
        if d.name in pngs:
            data = base64.b64encode(pngs[d.name]).decode()
            figures.append(f'<h3>{html.escape(d.title)}</h3><img alt="{d.name}" src="data:image/png;base64,{data}">')
        else:
            figures.append(f"<h3>{html.escape(d.title)}</h3><p class=na>not drawn: {html.escape(d.note)}</p>")
    units = (f"fps counts env frames (frameskip {study.frameskip}: one agent step = {study.frameskip} frames)"
             if study.frameskip else "fps counts env frames")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>rlbench report: {html.escape(study.title)}</title>
<style>{STYLE}</style></head><body>
<h1>rlbench report: {html.escape(study.title)}</h1>
<p>{html.escape(study.kind)} {html.escape(study.parent_id or '')} on {html.escape(study.host_label())}.
{html.escape(units)}. {len(study.finished)} of {len(study.jobs) + len(study.missing)} jobs finished.</p>
<h2>Verdict</h2><ul>{verdict}</ul>
{config_table(findings.get("configurations", {}))}
<h2>Jobs</h2>{job_table(study, findings["bottleneck"])}{not_measured(study)}
<h2>Figures</h2>{''.join(figures)}
</body></html>"""
