"""Figure layout every chart shares: tight_layout applied once (a figure saves one draw faster)."""

from __future__ import annotations


def tight_layout(fig, **kw) -> None:
    """`fig.tight_layout(**kw)`, then no layout engine left on the figure. Matplotlib leaves a
    placeholder engine behind, and any engine makes `savefig` draw the whole figure one extra
    time first: the same pixels (the same PNG bytes), about a quarter more time per save."""
    import matplotlib  # lazy: keeps matplotlib off the start of the commands that draw nothing

    fig.tight_layout(**kw)
    if not (matplotlib.rcParams["figure.autolayout"] or matplotlib.rcParams["figure.constrained_layout.use"]):
        fig.set_layout_engine(None)  # with those rcParams off, None means no engine at all
