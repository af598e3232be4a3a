"""One package per env family (atari/, gym/) beside the generic spec and vector env; the
registry that finds them by name is rlbench/core/env_families.py. docs/envs.md."""
