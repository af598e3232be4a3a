"""R2D2 as SEED RL runs it (Kapturowski et al. 2019; google-research/seed_rl agents/r2d2).

network.py, acting.py (epsilon-greedy, initial priorities), sequences.py + math.py, replay.py,
unroll_queue.py (SEED's coupling), rate_limit.py (the free couplings), learner.py, config.py;
build.py makes them for one job (`build(ctx)`). docs/r2d2.md.
"""
