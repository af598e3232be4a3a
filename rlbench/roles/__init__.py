"""The generic roles: actors, central inference, the learner loop (docs/algorithms.md)."""
