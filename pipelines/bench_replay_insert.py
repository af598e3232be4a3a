"""Replay insert on the actors' path: its median time with the learner sampling vs without.

Central inference inserts every completed sequence into replay (R2D2's EpsilonGreedy.store ->
SequenceReplay.insert, under the replay's lock) on the actors' thread, while the learner
samples batches from the same replay. Each run wraps the built trainer's `replay.insert`
(and `replay.sample`, to show the learner was active) with a timer, steps the actors with
the learner on or off (`learner=false`), and keeps the insert calls of a `--seconds`
window that opens once replay holds `algo.min_replay` sequences (when the learner may
start). The two modes alternate (the order flips every repeat) over `--repeats` repeats.
The median insert time with the learner on over the median with it off is printed last
as `replay_insert_ratio=<x>` (target <= 1.2).

It measures the inserts of `algo.coupling=free_running` (not SEED's coupling, where inference
copies unrolls into the unroll queue and the learner inserts them). The learner starts early
and never waits: a small min_replay, samples_per_insert=0 (unthrottled), effectively unlimited
frames and updates (runs are stopped by time), and
sm_limit=1 (one intra-op torch thread on a 2-core CPU host). Extra Hydra overrides are
passed through, after these. The learner's activity is printed (updates per run, sample
calls in each window, inserts that overlapped a sample): on a 2-core CPU host one update
at batch_size=64 takes tens of seconds, so a window sees about one sample; the run fails
if a learner-on run made no update or a mode recorded no insert in any of its windows.

`--learner sample` is the worst case for the lock: the learner thread does nothing but
sample full batches (the real copy of batch_size sequences) back to back, as a learner on a
fast GPU would; on a CPU host the real learner samples about once per update (seconds).

    python pipelines/bench_replay_insert.py                    # 5 repeats x 20 s per mode
    python pipelines/bench_replay_insert.py --learner sample   # learner samples back to back
    python pipelines/bench_replay_insert.py --repeats 1 --seconds 10 algo.batch_size=16
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time

from rlbench.cli.command import Parser, refuse
from rlbench.config.flags import number
from rlbench.config.rules import ConfigError
from rlbench.prepare.compose import compose_job
from rlbench.prepare.plan import plan_job
from rlbench.roles.runner import RoleFailed, RoleThread
from rlbench.train.trainer import build_trainer

PROG = "pipelines/bench_replay_insert.py"
DEFAULT_JOB = [
    "workload=smoke",
    "workload.frames=1000000000000",
    "workload.learner_updates=1000000000",
    "workload.max_runtime_s=0",
    "algo.min_replay=16",
    "algo.samples_per_insert=0",
    "algo.coupling=free_running",
    "sm_limit=1",
    "telemetry.enabled=false",
    "progress=log",
]


def config(args, learner: bool):
    overrides = [
        f"env={args.env}",
        f"actors={args.actors}",
        *DEFAULT_JOB,
        *args.overrides,
        f"learner={str(learner).lower()}",
    ]
    return compose_job(overrides)


def run_once(conf, seconds: float, sample_only: bool = False) -> dict:
    """One run; returns the insert durations (s) inside the window and the learner's activity."""
    plan = plan_job(conf)
    with plan.compute as compute:
        trainer = build_trainer(plan)
        try:
            inserts = _timed(trainer.parts.policy.replay, "insert")
            samples = _timed(trainer.parts.policy.replay, "sample")
            if sample_only and trainer.learner is not None:
                _sample_only(trainer.learner)
            stop = threading.Event()
            threads = [RoleThread(role, stop, compute.thread_scope) for role in trainer.roles()]
            for th in threads:
                th.start()
            try:
                _wait(
                    lambda: (
                        trainer.actors.stepping_since is not None
                        and trainer.parts.policy.replay.size >= conf.algo.min_replay
                    ),
                    threads,
                    stop,
                )
                start = time.perf_counter()
                _wait(lambda: time.perf_counter() - start >= seconds, threads, stop)
                end = time.perf_counter()
            finally:
                stop.set()
                for th in threads:
                    th.join()
            _raise_role_error(threads)
            learner = trainer.learner
            window_inserts = [(t0, d) for t0, d in list(inserts) if start <= t0 < end]
            window_samples = [(t0, d) for t0, d in list(samples) if t0 < end and t0 + d > start]
            return {
                "inserts": [d for _, d in window_inserts],
                "samples": [d for _, d in window_samples],
                # inserts that ran while a learner sample did (they may have waited for the lock)
                "overlapping": sum(
                    any(t0 < s0 + sd and s0 < t0 + d for s0, sd in window_samples) for t0, d in window_inserts
                ),
                "updates": (len(samples) if sample_only else learner.updates) if learner is not None else 0,
            }
        finally:
            trainer.close()


def _sample_only(learner) -> None:
    """The learner's update becomes one full-batch replay sample (no forward, no backward)."""

    def update() -> float:
        learner.replay.sample(learner.algo.batch_size)
        return float("nan")

    learner.update = update


def _timed(obj, name: str) -> list:
    """Replace obj.<name> on this instance by a timed call; returns the (start, seconds) list."""
    calls, original = [], getattr(obj, name)

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            calls.append((t0, time.perf_counter() - t0))

    setattr(obj, name, timed)
    return calls


def _wait(done, threads, stop: threading.Event) -> None:
    while not done():
        stop.wait(0.01)
        _raise_role_error(threads)
        if not all(th.is_alive() for th in threads):
            raise RuntimeError(
                "a role ended before the measured window did: "
                + ", ".join(th.name for th in threads if not th.is_alive())
            )


def _raise_role_error(threads) -> None:
    for th in threads:
        if th.error is not None:
            raise RoleFailed(f"role '{th.name}' failed: {th.error!r}") from th.error


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.3f} ms"


def main() -> None:
    p = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="pong")
    p.add_argument("--actors", type=number(int, lo=1), default=16)
    p.add_argument(
        "--seconds",
        type=number(float, lo=0, lo_open=True),
        default=20.0,
        help="measured window of each run (the actors insert about once per 80 agent steps)",
    )
    p.add_argument("--repeats", type=number(int, lo=1), default=5)
    p.add_argument(
        "--learner",
        choices=("update", "sample"),
        default="update",
        help="update: the real learner; sample: the learner thread only samples, back to back",
    )
    p.add_argument("overrides", nargs="*", help=f"extra Hydra overrides (after: {' '.join(DEFAULT_JOB)})")
    args = p.parse_args()
    try:
        confs = {True: config(args, True), False: config(args, False)}
    except ConfigError as e:
        refuse(PROG, f"{e} (no run started)")
    if confs[True].algo.name != "r2d2":
        sys.exit("bench_replay_insert: it measures R2D2's replay: needs algo.name=r2d2")
    inserts = {True: [], False: []}
    updates, samples, sample_s, overlapping = [], [], [], 0
    for i in range(args.repeats):
        order = (True, False) if i % 2 == 0 else (False, True)
        for learner in order:
            r = run_once(confs[learner], args.seconds, args.learner == "sample")
            gc.collect()  # free this run's replay before the next one allocates its own
            mode = "on" if learner else "off"
            if learner:
                if r["updates"] == 0 or not r["samples"]:
                    sys.exit(
                        f"bench_replay_insert: repeat {i + 1}, learner on: the learner made "
                        f"{r['updates']} updates ({len(r['samples'])} samples in the window); "
                        "it was not active, so the figure would mean nothing"
                    )
                updates.append(r["updates"])
                samples.append(len(r["samples"]))
                sample_s.extend(r["samples"])
                overlapping += r["overlapping"]
            inserts[learner].extend(r["inserts"])
            extra = (
                f", learner updates {r['updates']}, samples in window {len(r['samples'])}, "
                f"inserts during a sample {r['overlapping']}"
                if learner
                else ""
            )
            median = _ms(statistics.median(r["inserts"])) if r["inserts"] else "-"
            print(f"repeat {i + 1}, learner {mode}: {len(r['inserts'])} inserts, median {median}{extra}", flush=True)
    for learner, mode in ((True, "on"), (False, "off")):
        if not inserts[learner]:
            sys.exit(
                f"bench_replay_insert: no replay insert in any learner-{mode} window; the actors insert "
                f"once per 80 agent steps of all {args.actors} actors: raise --seconds"
            )
    on, off = statistics.median(inserts[True]), statistics.median(inserts[False])
    c = confs[True]
    print(
        f"learner updates per learner-on run: {updates}; learner samples in each window: {samples} "
        f"(median sample call {_ms(statistics.median(sample_s))}); "
        f"inserts during a sample: {overlapping} of {len(inserts[True])}"
    )
    print(f"slowest insert with learner {_ms(max(inserts[True]))}, without {_ms(max(inserts[False]))}")
    print(
        f"median replay insert with learner {_ms(on)} over {len(inserts[True])} inserts, "
        f"without {_ms(off)} over {len(inserts[False])} inserts "
        f"(env={c.env.id}, actors={c.actors}, batch_size={c.algo.batch_size}, sm_limit={c.sm_limit}, "
        f"learner={args.learner}, "
        f"{args.repeats} x {args.seconds:g} s per mode)"
    )
    print(f"replay_insert_ratio={on / off:.3f}")


if __name__ == "__main__":
    main()
