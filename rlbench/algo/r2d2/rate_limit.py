"""The replay ratio of the free couplings: sequence samples per inserted sequence (`samples_per_insert`, spi).

Under `algo.coupling=free_running` and `rate_limited` (not SEED's: its default is the unroll
queue, rlbench.algo.r2d2.unroll_queue) inference inserts into replay itself and the learner
respects the ratio: it may not sample ahead of spi x inserted sequences while actors still run
(after they stop it trains on what is there). With `rate_limited` (Reverb's
SampleToInsertRatio idea) actors wait too when they get more than `slack` sequences ahead of
the learner. With `free_running` actors never wait, so actor throughput is measured unhindered.
"""

from __future__ import annotations


def learner_may_update(updates: int, batch: int, inserted: int, size: int, min_replay: int,
                       spi: float, actors_done: bool) -> bool:
    if actors_done:
        return size > 0
    if size < min_replay:
        return False
    return spi <= 0 or (updates + 1) * batch <= spi * inserted


def actors_may_insert(updates: int, batch: int, inserted: int, min_replay: int, spi: float,
                      slack: int) -> bool:
    """False while the actors are more than `slack` sequences past what the learner used."""
    if spi <= 0:
        return True
    allowed = min_replay + slack + updates * batch / spi
    return inserted <= allowed
