"""A job's telemetry drawn: the timeline of power, utilisation and operation shares
(timeline.py: telemetry.png), the time per operation (operations.py: operations.json and
operations.png), and the one colour per operation every figure uses (colours.py). docs/metrics.md."""
