"""The per-job operations table and chart: the op_frac metrics in the contract's order, one bar
per role, each operation in its op_colour and named once in the legend."""

import math

import matplotlib.image
from matplotlib.colors import to_hex

from rlbench.telemetry.charts.colours import op_colour
from rlbench.telemetry.charts.operations import as_columns, op_breakdown_figure, op_breakdown_rows, plot_op_breakdown

METRICS = {
    "fps": 10.0,
    "op_frac/learner/other": 0.1,
    "op_frac/learner/wait": 0.123456,
    "op_frac/actors/inference": 0.5,
    "op_frac/actors/env_step": 0.4,
    "op_frac/actors/other": 0.1,
    "op_frac/learner/forward_backward": 0.776544,
    "op_frac/inference/forward": 0.97,
    "op_frac/inference/other": 0.03,
    "window/fps": 3.0,
    "op_frac/actors": 1.0,
}


def test_rows_follow_the_contract_order_with_rounded_fractions_and_seconds_where_the_wall_is_known():
    rows = op_breakdown_rows(METRICS, {"actors": 10.0, "inference": 2.0})
    assert [(r["role"], r["op"]) for r in rows] == [
        ("actors", "env_step"),
        ("actors", "inference"),
        ("actors", "other"),
        ("inference", "forward"),
        ("inference", "other"),
        ("learner", "wait"),
        ("learner", "forward_backward"),
        ("learner", "other"),
    ]
    assert rows[0] == {"role": "actors", "op": "env_step", "fraction": 0.4, "seconds": 4.0}
    assert rows[3]["seconds"] == 1.94
    assert rows[5] == {"role": "learner", "op": "wait", "fraction": 0.1235, "seconds": None}  # no learner wall
    assert as_columns(rows) == {
        "role": [r["role"] for r in rows],
        "op": [r["op"] for r in rows],
        "fraction": [r["fraction"] for r in rows],
        "seconds": [r["seconds"] for r in rows],
    }


def test_rows_ignore_other_metrics_and_unmeasured_values_and_keep_unknown_roles_apart():
    assert op_breakdown_rows({"fps": 1.0, "loss": 2.0}) == []
    assert op_breakdown_rows({"op_frac/actors/env_step": math.nan, "op_frac/actors/other": None}) == []
    rows = op_breakdown_rows(
        {
            "op_frac/zeta/other": 0.5,
            "op_frac/replay/other": 0.2,
            "op_frac/replay/sample": 0.8,
            "op_frac/zeta/a": 0.5,
            "op_frac/learner/custom": 0.3,
            "op_frac/learner/other": 0.2,
            "op_frac/learner/publish": 0.5,
        }
    )
    assert [(r["role"], r["op"]) for r in rows] == [
        ("learner", "publish"),
        ("learner", "custom"),
        ("learner", "other"),  # declared, undeclared, other
        ("replay", "sample"),
        ("replay", "other"),
        ("zeta", "a"),
        ("zeta", "other"),
    ]


def _segments(fig) -> dict[str, object]:
    return {p.get_gid(): p for p in fig.axes[0].patches}


def test_chart_has_one_bar_per_role_in_each_operation_s_colour():
    rows = op_breakdown_rows(METRICS)
    fig = op_breakdown_figure(rows, "time per operation, job")
    segments = _segments(fig)
    assert set(segments) == {f"{r['role']}/{r['op']}" for r in rows}
    centre = {gid: round(p.get_y() + p.get_height() / 2, 6) for gid, p in segments.items()}
    bars = {
        role: {c for gid, c in centre.items() if gid.startswith(f"{role}/")}
        for role in ("actors", "inference", "learner")
    }
    assert all(len(ys) == 1 for ys in bars.values()) and len(set.union(*bars.values())) == 3  # one bar per role
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["actors", "inference", "learner"]
    assert all(to_hex(p.get_facecolor()) == op_colour(gid.split("/")[1]) for gid, p in segments.items())
    # stacked: each role's segments fill its bar from 0 to the sum of its fractions
    assert segments["actors/inference"].get_x() == segments["actors/env_step"].get_width()
    assert fig.axes[0].get_xlabel() == "share of the role's wall time" and fig.axes[0].get_xlim() == (0.0, 1.0)


def test_legend_names_each_op_once_and_percentages_sit_on_wide_segments_only():
    fig = op_breakdown_figure(op_breakdown_rows(METRICS), "t")
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["env_step", "inference", "forward", "wait", "forward_backward", "other"]
    assert [to_hex(h.get_facecolor()) for h in legend.legend_handles] == [op_colour(op) for op in labels]
    written = {t.get_gid(): t.get_text() for t in fig.axes[0].texts}
    assert written["pct/actors/env_step"] == "40%" and written["pct/learner/other"] == "10%"
    assert "pct/inference/other" not in written  # 3%: too narrow to write on
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    for text in [*legend.get_texts(), *fig.axes[0].texts]:
        e = text.get_window_extent(renderer)
        assert e.x0 >= 0 and e.y0 >= 0 and e.x1 <= fig.bbox.width and e.y1 <= fig.bbox.height


def test_png_is_900_px_wide(tmp_path):
    path = plot_op_breakdown(op_breakdown_rows(METRICS), tmp_path / "operations.png", "time per operation, job")
    assert path.exists() and matplotlib.image.imread(path).shape[1] == 900


def test_the_shared_tight_layout_saves_the_same_png_bytes_without_the_extra_draw(monkeypatch):
    """rlbench/telemetry/charts/layout.py: no layout engine is left, so savefig draws once, and
    the PNG is byte for byte the one matplotlib's own tight_layout gives."""
    import io

    from matplotlib.figure import Figure

    from rlbench.telemetry.charts import operations
    from rlbench.telemetry.charts.layout import tight_layout

    def png(ours: bool) -> tuple[bytes, int]:
        if not ours:  # matplotlib's own, which leaves its placeholder engine behind
            monkeypatch.setattr(operations, "tight_layout", lambda fig, **kw: fig.tight_layout(**kw))
        fig = op_breakdown_figure(op_breakdown_rows(METRICS), "a job")
        draws = []
        monkeypatch.setattr(
            Figure, "draw", lambda self, renderer, _d=Figure.draw: draws.append(1) or _d(self, renderer)
        )
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        monkeypatch.undo()
        return buf.getvalue(), len(draws)

    (ours, our_draws), (theirs, their_draws) = png(True), png(False)
    assert ours == theirs and (our_draws, their_draws) == (1, 2)
    fig = Figure()
    fig.subplots()
    tight_layout(fig)
    assert fig.get_layout_engine() is None
