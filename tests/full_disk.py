"""`python -m tests.full_disk FOLDER ARGS`: `python -m rlbench ARGS` whose disk at FOLDER fills
up once the job has logged its first frames (a file takes all but 16 KiB of what is free), so
that the tests of a full disk during a job run on a small filesystem of the test's own; a
fake of the disk filling, not of what rlbench does then."""

import os
import runpy
import sys

from rlbench.train import recording

_real_tick = recording.RecordObserver.tick


def _filling(folder: str):
    filled = []

    def tick(self, metrics: dict, step: int) -> None:
        if not filled and metrics.get("frames", 0) > 0:
            st = os.statvfs(folder)
            with open(os.path.join(folder, "filler"), "wb") as f:
                f.write(b"\0" * max(st.f_bavail * st.f_frsize - 16 * 1024, 0))
            filled.append(True)
        _real_tick(self, metrics, step)

    return tick


if __name__ == "__main__":
    recording.RecordObserver.tick = _filling(sys.argv[1])
    sys.argv[:2] = ["rlbench"]
    runpy.run_module("rlbench", run_name="__main__", alter_sys=True)
