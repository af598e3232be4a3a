"""A test-only algorithm, `tiny`, that proves the algorithm seam (tests/test_algo_seam.py).

Uniform random actions through central inference (no network), unrolls of unroll_length
steps into an unbounded FIFO, and a learner whose "update" takes batch_size unrolls and
averages their rewards. It is added with rlbench.core.algorithms.ALGORITHMS.register("tiny", "tests.algo_tiny") in
the test process, or RLBENCH_ALGORITHMS=tiny=tests.algo_tiny for the CLI: nothing in rlbench
names it. config.py declares what rlbench asks of an algorithm; build.py makes its parts.
"""
