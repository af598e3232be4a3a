"""`python -m tests.full_disk FOLDER ARGS`: `python -m rlbench ARGS` whose disk at FOLDER fills
up once the job has logged its first frames (a file takes all but 16 KiB of what is free), so
that the tests of a full disk during a job run on a small filesystem of the test's own; a
fake of the disk filling, not of what rlbench does then."""

import errno
import os
import runpy
import sys

from rlbench.train import recording

_real_tick = recording.RecordObserver.tick
LEAVE = 16 * 1024  # bytes left free
CHUNK = 8 << 20


def _free(folder: str) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def fill(folder: str) -> None:
    """A file at FOLDER/filler takes all but LEAVE bytes of what is free. MLflow's threads write
    to the same disk meanwhile, so it writes in chunks while there is room, stops at ENOSPC (the
    space shrank under it) and gives back what it took beyond LEAVE."""
    path = os.path.join(folder, "filler")
    with open(path, "wb", buffering=0) as f:
        while (room := _free(folder) - LEAVE) > 0:
            try:
                f.write(b"\0" * min(room, CHUNK))
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    if (short := LEAVE - _free(folder)) > 0:
        os.truncate(path, max(os.path.getsize(path) - short, 0))


def _filling(folder: str):
    filled = []

    def tick(self, metrics: dict, step: int) -> None:
        if not filled and metrics.get("frames", 0) > 0:
            fill(folder)
            filled.append(True)
        _real_tick(self, metrics, step)

    return tick


if __name__ == "__main__":
    recording.RecordObserver.tick = _filling(sys.argv[1])
    sys.argv[:2] = ["rlbench"]
    runpy.run_module("rlbench", run_name="__main__", alter_sys=True)
