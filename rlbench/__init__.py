"""rlbench: where RL training spends its time and energy (SEED RL-style R2D2 and V-trace on Atari
under telemetry, Hydra sweeps, MLflow records). `python -m rlbench`; docs/architecture.md.

The Python API, imported when first asked for (rlbench/api/; docs/usage.md, "The Python API"):
`rlbench.sweep(overrides)`, `rlbench.search(overrides)`, `rlbench.make_report(parent_run_id)`
and `rlbench.study(...)`."""

import importlib

API = {
    "sweep": "rlbench.api.sweep",
    "search": "rlbench.api.sweep",
    "make_report": "rlbench.api.report",
    "study": "rlbench.api.study",
}


def __getattr__(name: str):
    """The API's callables by name, from their modules (which load Hydra, MLflow and Optuna: not
    at the start of every command under rlbench)."""
    if name not in API:
        raise AttributeError(f"module 'rlbench' has no attribute {name!r}")
    return getattr(importlib.import_module(API[name]), name)
