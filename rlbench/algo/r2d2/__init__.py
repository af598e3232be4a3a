"""R2D2 as SEED RL runs it (Kapturowski et al. 2019; google-research/seed_rl agents/r2d2).

network.py (recurrent dueling Q-net), acting.py (epsilon-greedy, initial priorities),
sequences.py + math.py (the numpy and tensor math), replay.py (prioritized sequence replay),
unroll_queue.py (SEED's coupling of inference and the learner), rate_limit.py (the replay ratio
of the free couplings), learner.py, config.py (schema and rules).
build.py makes them for one job (`build(ctx)`).
"""
