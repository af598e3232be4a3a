"""Zero arrays on the kernel's small pages, for the large storage a job touches at its start.

numpy asks for transparent huge pages for large arrays, whose first touch can wait for the
kernel to compact memory: 0.3-3.6 s for Pong's 1.7 GB of replay frames on the 2-core VM against
0.8-1.4 s on small pages, sampling as fast (docs/results/startup.md, "The replay's storage").
"""

from __future__ import annotations

import contextlib
import mmap

import numpy as np

SMALL_PAGES_FROM = 1 << 26  # 64 MiB: an array this large is mapped on small pages


def small_pages(shape: tuple, dtype) -> np.ndarray:
    """A zero array of `shape`: an anonymous mapping on small pages from SMALL_PAGES_FROM bytes
    (zero until touched), numpy's own below."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if nbytes < SMALL_PAGES_FROM:
        return np.zeros(shape, dtype)
    pages = mmap.mmap(-1, nbytes)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux; elsewhere the kernel's default pages
        with contextlib.suppress(OSError):  # a kernel without transparent huge pages: small already
            pages.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(pages, dtype).reshape(shape)
