"""One package per algorithm (r2d2/, vtrace/, random/) and what they share (common/); the
registry that finds them by name is rlbench/core/algorithms.py. docs/algorithms.md."""
