"""One job: the trainer that wires the roles, run_job, and the job's MLflow record.
docs/architecture.md."""
