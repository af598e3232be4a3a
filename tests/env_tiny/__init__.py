"""A test-only env family, named nowhere in rlbench: a corridor in pure numpy (family.py
declares it, corridor.py steps it). tests/test_env_seam.py runs a job with it."""
