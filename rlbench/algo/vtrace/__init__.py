"""V-trace (IMPALA, Espeholt et al. 2018) as SEED RL's agents/vtrace runs it.

network.py (torso, optional LSTM core, policy and baseline heads), acting.py (softmax
sampling; greedy for evaluation envs), queue.py (the bounded FIFO of whole unrolls: no
replay), math.py (V-trace targets and the loss), learner.py, config.py (schema and rules).
build.py makes them for one job (`build(ctx)`).
"""
