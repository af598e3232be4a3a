"""The replay ratio of the free couplings (`free_running`, `rate_limited`; not SEED's): sequence
samples per inserted sequence (`samples_per_insert`). The learner may not sample ahead of it
while the actors run; under `rate_limited` the actors also wait when more than `slack`
sequences ahead. docs/r2d2.md, "Decisions where rlbench differs".
"""

from __future__ import annotations


def learner_may_update(
    updates: int, batch: int, inserted: int, size: int, min_replay: int, spi: float, actors_done: bool
) -> bool:
    if actors_done:
        return size > 0
    if size < min_replay:
        return False
    return spi <= 0 or (updates + 1) * batch <= spi * inserted


def actors_may_insert(updates: int, batch: int, inserted: int, min_replay: int, spi: float, slack: int) -> bool:
    """False while the actors are more than `slack` sequences past what the learner used."""
    if spi <= 0:
        return True
    allowed = min_replay + slack + updates * batch / spi
    return inserted <= allowed
