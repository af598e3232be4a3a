"""The per-job operations table and chart: the op_frac metrics in the contract's order."""

from matplotlib.colors import to_hex

from rlbench.telemetry.colours import op_colour
from rlbench.telemetry.op_chart import as_columns, op_breakdown_rows, plot_op_breakdown

METRICS = {"fps": 10.0, "op_frac/learner/other": 0.1, "op_frac/learner/wait": 0.123456,
           "op_frac/actors/inference": 0.5, "op_frac/actors/env_step": 0.4, "op_frac/actors/other": 0.1,
           "op_frac/learner/forward_backward": 0.776544}


def test_rows_follow_the_contract_order_with_seconds_where_the_wall_is_known():
    rows = op_breakdown_rows(METRICS, {"actors": 10.0})
    assert [(r["role"], r["op"]) for r in rows] == [("actors", "env_step"), ("actors", "inference"),
                                                    ("actors", "other"), ("learner", "wait"),
                                                    ("learner", "forward_backward"), ("learner", "other")]
    assert rows[0]["seconds"] == 4.0 and rows[3]["seconds"] is None and rows[3]["fraction"] == 0.1235
    assert as_columns(rows)["op"][:2] == ["env_step", "inference"]
    assert op_breakdown_rows({"fps": 1.0}) == []


def test_chart_has_one_bar_per_role_in_each_operation_s_colour(tmp_path):
    import matplotlib.image

    rows = op_breakdown_rows(METRICS)
    path = plot_op_breakdown(rows, tmp_path / "operations.png", "t")
    assert matplotlib.image.imread(path).shape[1] >= 800
    # redraw to inspect the artists (the function saves and drops its figure)
    from rlbench.telemetry import op_chart

    seen = {}
    original = op_chart.Figure.savefig

    def keep(fig, *a, **k):
        seen.update({p.get_gid(): to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches})
        return original(fig, *a, **k)

    op_chart.Figure.savefig = keep
    try:
        plot_op_breakdown(rows, tmp_path / "again.png", "t")
    finally:
        op_chart.Figure.savefig = original
    assert {gid.split("/")[0] for gid in seen} == {"actors", "learner"}
    assert all(colour == op_colour(gid.split("/")[1]) for gid, colour in seen.items())
