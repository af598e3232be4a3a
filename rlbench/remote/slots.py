"""The job's global env ids handed out in contiguous ranges, one per actor process: ids below
`actors` are training envs, the rest eval envs, as in-process. A range freed by a
disconnect is only handed out again once the job has been told of it (`release`), so that
the job never mistakes a new actor's envs for the lost ones (docs/actors.md)."""

from __future__ import annotations

import numpy as np


class EnvSlots:
    def __init__(self, total: int):
        self.total = total
        self._taken = np.zeros(total, bool)

    def take(self, n: int) -> int | None:
        """The first id of a free range of n ids, now taken; None if there is none (first fit)."""
        free = ~self._taken
        for first in range(self.total - n + 1):
            if free[first : first + n].all():
                self._taken[first : first + n] = True
                return first
        return None

    def release(self, first: int, n: int) -> None:
        self._taken[first : first + n] = False

    @property
    def free(self) -> int:
        return int((~self._taken).sum())
