"""A job's telemetry drawn: the timeline of power, utilisation and operation shares
(timeline.py: telemetry.png), the time per operation (operations.py: operations.json and
operations.png), the one colour per operation every figure uses (colours.py) and the layout
every figure shares (layout.py). docs/metrics.md."""
