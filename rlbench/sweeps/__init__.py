"""Many jobs under one MLflow parent run (Hydra multirun), and a SLURM submission's dry run.
docs/usage.md."""
