"""One self-contained HTML file: figures inlined as base64 PNG, the verdict, the job table
(docs/metrics.md, "Report artifacts")."""

from __future__ import annotations

import base64
import html
import io

from rlbench.report.figures import Drawn
from rlbench.report.never_measured import never_measured, one_line
from rlbench.tracking.study_records import JobRun, Study
from rlbench.tracking.unmeasured import explain

# (header, unit, key): the header on its lines, the unit on a small line below it (no header
# takes more than three short lines); the key is the header's tooltip
COLUMNS = (
    ("actors", "", "actors"),
    ("actor\nthreads", "", "actor_threads_used"),
    ("units\ngranted", "", "sm_granted"),
    ("CPU/GPU\nratio", "", "cpu_gpu_ratio"),
    ("CPU/GPU\nper node", "pack=K", "node/cpu_gpu_ratio"),
    ("fps", "frames/s", "fps"),
    ("runtime", "s", "runtime_s"),
    ("sim\nshare", "", "sim_share"),
    ("learner\nshare", "", "learner_share"),
    ("energy\nper task", "J", "energy_per_task_j"),
    ("perf/W", "frames/J", "perf_per_watt"),
    ("GPU\npower", "W avg", "power_gpu_w_avg"),
    ("GPU\nbusy", "", "gpu_busy_frac"),
    ("NVML\nutil", "", "gpu_util_avg"),
    ("eval\nreturn", "last 20", "eval_return_mean20"),
)
PERCENT = ("sim_share", "learner_share", "gpu_busy_frac", "gpu_util_avg")  # fractions, shown as percent

STYLE = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 8px;color:#222}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 4px;text-align:right}th{white-space:nowrap;vertical-align:bottom}
th small{font-weight:normal;color:#555}td:first-child,th:first-child{text-align:left}
.bad{background:#fdd}.na{color:#999}img{max-width:100%}li.warn{color:#a00}"""


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


def _cell(job: JobRun, key: str) -> str:
    v = job.knob(key)
    if v is None:
        return f'<td class="na" title="{html.escape(job.why_missing(key))}">n/a</td>'
    if key in PERCENT:
        return f"<td>{v:.0%}</td>"
    return f"<td>{v:.0f}</td>" if abs(v) >= 1000 else f"<td>{v:.3g}</td>"


def shown_columns(study: Study) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """The table's columns some finished job measured, and {key: why} for those none did.
    Without a GPU the CPU/GPU ratio is left out (the verdict says once why)."""
    unpacked = {"node/cpu_gpu_ratio"} if not study.packs else set()  # a sweep without packs: no such column
    absent = never_measured(study.finished, [k for _, _, k in COLUMNS if k not in unpacked])
    skip = ({"cpu_gpu_ratio", "node/cpu_gpu_ratio"} if study.without_gpu else set()) | unpacked
    return [c for c in COLUMNS if c[2] not in absent and c[2] not in skip], absent


def _head(name: str, unit: str, key: str) -> str:
    lines = "<br>".join(html.escape(line) for line in name.splitlines())
    return f'<th title="{key}">{lines}' + (f"<br><small>{html.escape(unit)}</small>" if unit else "") + "</th>"


def job_table(study: Study, bounds: dict, columns: list[tuple[str, str, str]]) -> str:
    head = "<tr><th>job</th><th>status</th>" + "".join(_head(n, u, k) for n, u, k in columns) + "<th>bound</th></tr>"
    rows = []
    for j in study.jobs:
        cls = "" if j.finished else ' class="bad"'
        why = f' title="{html.escape(j.error)}"' if j.error and not j.finished else ""  # the verdict says it too
        bound = bounds.get(j.name, {}).get("kind", "-")
        rows.append(
            f"<tr{cls}><td>{html.escape(j.name)}</td><td{why}>{j.status}</td>"
            + "".join(_cell(j, k) for _, _, k in columns)
            + f"<td>{html.escape(bound)}</td></tr>"
        )
    rows += [
        f'<tr class="bad"><td colspan="{len(columns) + 3}">MISSING: {html.escape(m)}</td></tr>' for m in study.missing
    ]
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


CONFIG_COLUMNS = (
    ("runtime (s)", "runtime_s"),
    ("task fps", "task_fps"),
    ("fps (env frames/s)", "fps"),
    ("energy per task (J)", "energy_per_task_j"),
)


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
    rows = [
        f"<tr><td>{html.escape(name)}</td>" + "".join(cell(c.get(k)) for _, k in CONFIG_COLUMNS) + "</tr>"
        for name, c in configs.items()
    ]
    return (
        f"<h2>Configurations</h2><p>median (min..max, n) of each configuration's finished runs; the verdict "
        f"compares medians and calls no difference within the noise floor</p><table>{head}{''.join(rows)}</table>"
    )


def not_measured(study: Study, columns: list[tuple[str, str, str]], absent: dict[str, str]) -> str:
    """One line for the columns no job measured (left out of the table), then each shown column
    some finished job could not measure, with the distinct reasons."""
    items = []
    for name, unit, key in columns:
        reasons = sorted({explain(key, j.nulls) or j.why_missing(key) for j in study.finished if j.knob(key) is None})
        head = " ".join([*name.split(), unit]).strip()
        items += [f"<li>{html.escape(head)} ({key}): {html.escape(r)}</li>" for r in reasons]
    line = f"<p>{html.escape(one_line(absent))}</p>" if absent else ""
    return line + (f"<p>n/a means not measured:</p><ul>{''.join(items)}</ul>" if items else "")


def _jobs(study: Study, bounds: dict) -> str:
    columns, absent = shown_columns(study)
    return job_table(study, bounds, columns) + not_measured(study, columns, absent)


def render(study: Study, drawn: list[Drawn], pngs: dict[str, bytes], findings: dict, lines: list[str]) -> str:
    verdict = "".join(
        f"<li{' class=warn' if line.startswith(('NOT FINISHED', 'MISSING')) else ''}>{html.escape(line)}</li>"
        for line in lines
    )
    figures = []
    for d in drawn:
        if d.name in pngs:
            data = base64.b64encode(pngs[d.name]).decode()
            figures.append(f'<h3>{html.escape(d.title)}</h3><img alt="{d.name}" src="data:image/png;base64,{data}">')
        else:
            figures.append(f"<h3>{html.escape(d.title)}</h3><p class=na>not drawn: {html.escape(d.note)}</p>")
    units = (
        f"fps counts env frames (frameskip {study.frameskip}: one agent step = {study.frameskip} frames)"
        if study.frameskip
        else "fps counts env frames"
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>rlbench report:
{html.escape(study.title)}</title><style>{STYLE}</style></head><body>
<h1>rlbench report: {html.escape(study.title)}</h1>
<p>{html.escape(study.kind)} {html.escape(study.parent_id or "")} on {html.escape(study.host_label())}.
{html.escape(units)}. {len(study.finished)} of {len(study.jobs) + len(study.missing)} jobs finished.</p>
<h2>Verdict</h2><ul>{verdict}</ul>
{config_table(findings.get("configurations", {}))}
<h2>Jobs</h2>{_jobs(study, findings["bottleneck"])}
<h2>Figures</h2>{"".join(figures)}
</body></html>"""
