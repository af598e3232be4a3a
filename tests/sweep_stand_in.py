"""`python -m tests.sweep_stand_in -m SECONDS`: a stand-in for `python -m rlbench -m` in the
tests of a sweep's time limit (rlbench/cli/run_and_report.py run_sweep): it prints a parent run line
as a sweep does, then sleeps SECONDS; on SIGTERM it says so and exits 143, as a sweep does."""

import signal
import sys
import time


def _stopped(signum, frame):
    print("stand-in: SIGTERM", flush=True)
    sys.exit(143)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stopped)
    print(f"[rlbench sweep] parent run {'a' * 32} (stand-in)", flush=True)
    time.sleep(float(sys.argv[-1]))
    print("stand-in: done", flush=True)
