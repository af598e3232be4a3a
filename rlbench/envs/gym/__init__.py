"""The gym family: gymnasium envs with discrete actions and vector observations, stepped by
gymnasium's sync vector env (family.py declares it; docs/envs.md)."""
