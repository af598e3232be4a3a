"""rlbench: where RL training spends its time and energy (SEED RL-style R2D2 and V-trace on Atari
under telemetry, Hydra sweeps, MLflow records). `python -m rlbench`; docs/architecture.md."""
