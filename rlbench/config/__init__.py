"""The config: schemas, composition and the checks every command shares (docs/jobs.md)."""
