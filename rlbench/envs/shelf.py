"""Vector envs kept for the next job of this process (a sweep's, a search's, the GPU study's).

A finished job's env goes on the shelf once nothing is in flight (`settle`); a job of the same
spec takes it and resets it with its own seed, as it would a new one: same episodes, without
making the emulators again. At most MAX_ENVS emulators wait, oldest closed first (docs/envs.md).
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict

MAX_ENVS = 512  # emulators kept idle in all (Atari: ~1.5 MB each, ENV_BYTES)


def shelf_key(cfg, num_envs: int, threads: int, batch: int, affinity_offset: int) -> tuple:
    """What makes two vector envs the same: every env.* setting and how the env is stepped
    (the seed is not: each job's reset sets its own)."""
    return (getattr(cfg, "kind", None), repr(cfg), num_envs, threads, batch, affinity_offset)


class EnvShelf:
    def __init__(self, max_envs: int = MAX_ENVS):
        self.max_envs = max_envs
        self._idle: OrderedDict[tuple, tuple[object, int]] = OrderedDict()  # key -> (env, emulators)
        self._lock = threading.Lock()
        self.taken = 0  # envs handed out again (for tests and the benchmark)

    def take(self, key: tuple, make):
        """The idle env made for `key`, else `make()`."""
        with self._lock:
            kept = self._idle.pop(key, None)
        if kept is None:
            return make()
        self.taken += 1
        return kept[0]

    def shelve(self, key: tuple, env, emulators: int) -> bool:
        """Keep `env` for the next job of `key` if it settles (nothing left in flight) and fits;
        else close it. True if kept."""
        settle = getattr(env, "settle", None)
        if emulators > self.max_envs or settle is None or not settle():
            env.close()
            return False
        with self._lock:
            evicted = [self._idle.pop(key)[0]] if key in self._idle else []
            self._idle[key] = (env, emulators)
            while sum(n for _, n in self._idle.values()) > self.max_envs:
                evicted.append(self._idle.popitem(last=False)[1][0])
        for old in evicted:
            old.close()
        return True

    def clear(self) -> None:
        """Close every idle env (at the process's exit, and in tests)."""
        with self._lock:
            idle, self._idle = list(self._idle.values()), OrderedDict()
        for env, _ in idle:
            env.close()

    def __len__(self) -> int:
        return len(self._idle)


SHELF = EnvShelf()  # the process's one shelf
atexit.register(SHELF.clear)  # the emulators' threads end before the interpreter does
