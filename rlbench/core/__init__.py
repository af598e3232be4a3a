"""Leaf modules every floor may use: the metric contract, resources and the device, precision,
the observers of a job's life, the plugin registries. docs/architecture.md."""
