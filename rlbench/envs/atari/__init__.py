"""The Atari family: ALE ROMs stepped by ale-py's C++ AtariVectorEnv (family.py declares it; docs/envs.md)."""
