"""MLflow's one port: no module outside this package imports mlflow (docs/metrics.md)."""
