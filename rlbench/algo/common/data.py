"""What a learner takes of the actors' stream, declared by each algorithm for the performance
model (rlbench/predict/model.py, through rlbench/predict/jobs.py). Torch-free.
docs/algorithms.md, `learner_data`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LearnerData:
    first_unrolls: int  # unrolls that must exist before the first update
    first_steps: int  # agent steps of an actor's first unroll (R2D2's starts zero-padded: fewer)
    stride: int  # agent steps between the starts of an actor's consecutive unrolls
    steps_per_update: float  # agent steps of data each later update takes while the actors run (0: none)
    queue_unrolls: int | None = (
        None  # a bounded queue's capacity, which holds the actors (SEED's unroll queue); None: none
    )
