"""What the algorithm packages share (seed_rl calls its own `common/`): the contract with the
generic roles (parts.py), config checks, frame stacks, unroll assembly, learner batches,
network torsos, Keras' Adam, and the learner-data declaration the performance model reads
(data.py). The algorithm packages (r2d2/, vtrace/, random/) and the registry
(rlbench/core/algorithms.py) stay one level up. docs/algorithms.md."""
