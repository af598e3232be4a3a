"""Uniform random actions through central inference: no network or learner; unrolls are
assembled and dropped (the actor-path benchmark's algorithm). build.py: `build(ctx)`.
docs/algorithms.md."""
