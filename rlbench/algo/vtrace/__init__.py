"""V-trace (IMPALA, Espeholt et al. 2018) as SEED RL's agents/vtrace runs it.

network.py, acting.py (softmax sampling; greedy for evaluation envs), queue.py (the FIFO of
whole unrolls: no replay), math.py (targets and loss), learner.py, config.py; build.py makes
them for one job (`build(ctx)`). docs/vtrace.md.
"""
