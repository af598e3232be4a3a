"""Everything decided before a job starts: compose conf/, validate, expand a grid, plan the job,
check the stores. docs/architecture.md."""
