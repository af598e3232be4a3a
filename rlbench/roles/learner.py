"""The learner role's loop, shared by the algorithms' learners (rlbench/algo/<name>/learner.py).

A learner subclasses `LearnerLoop` and gives `may_update()`, `update()` (returns its loss) and
optionally `exhausted()`; until it may update, the loop sleeps on its `wakeup`, which whatever
feeds it rings. The loop owns the counters the runner reads and `finished`. docs/algorithms.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import torch

from rlbench.core.hot_path import EAGER
from rlbench.roles.hot_path import HotPath, learner_path
from rlbench.telemetry.flops import FlopRate
from rlbench.telemetry.timing import OpTimer


class Wakeup:
    """Where an idle learner sleeps (SEED RL's learner blocks in `dequeue_many`): whatever changes
    what its `may_update()` or `exhausted()` reads (an unroll put into its queue or replay, the
    actors done) rings it, so it wakes at once and not at the next poll."""

    def __init__(self):
        self._cond = threading.Condition()

    def ring(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Sleep until `ready()` (checked under the lock `ring` takes, so no ring is missed) or
        `timeout` seconds; returns `ready()`."""
        with self._cond:
            return self._cond.wait_for(ready, timeout)


class LearnerLoop:
    name = "learner"
    stop_check_s = 0.2  # nothing rings on the runner's `stop`: an idle learner looks at it this often

    def __init__(self, update_target: int, actors_done: threading.Event, timer: OpTimer | None = None):
        self.update_target = update_target  # the workload's learner_updates
        self.actors_done = actors_done
        self.updates = 0
        self.finished = threading.Event()  # set when the learner leaves run(), for any reason
        self.first_update_at: float | None = (
            None  # perf_counter when the first update ended (the steady rates' warm-up)
        )
        self.finished_at: float | None = None  # perf_counter when it left run()
        self.intra_op_threads: int | None = None
        self.last_loss = float("nan")
        self.timer = timer or OpTimer("learner")  # the job's telemetry makes it (GPU spans, the timeline)
        self.flops = FlopRate()  # model FLOPs per update (counted once, torch's counter) and the updates' time
        self.wakeup = Wakeup()  # a subclass has its data's producers ring it; the trainer rings it when the actors end
        self.hot: HotPath | None = None  # the loss and gradients' mode (use_hot_path); None: eager

    def use_hot_path(self, mode: str, compiler=None) -> None:
        """Run the subclass's `_grads(self._loss, *args)` with `_loss` in `mode` (rlbench/core/hot_path.py)."""
        self.hot = learner_path(mode, self._loss, self._grads, compiler)

    def gradients(self, *args):
        """The loss of `args` with its gradients made (`_grads`), in the learner's hot-path mode."""
        if self.hot is None:
            self.use_hot_path(EAGER)
        return self.hot(*args)

    def run(self, stop: threading.Event) -> None:
        self.intra_op_threads = torch.get_num_threads()  # what sm_limit granted on CPU, seen here
        try:
            while not stop.is_set() and self.updates < self.update_target and not self.exhausted():
                if not self.may_update():
                    with self.timer.op("wait"):
                        self.wakeup.wait_for(
                            lambda: stop.is_set() or self.may_update() or self.exhausted(), self.stop_check_s
                        )
                    continue
                self._update()
        finally:
            self.finished_at = time.perf_counter()
            self.finished.set()

    def _update(self) -> None:
        """One update() call; its FLOPs and time count where it trained (it may have only fed
        replay). The time runs to its loss on the host, so a CUDA update is over."""
        before = self.updates
        with self.flops.call(0) as call:
            self.last_loss = self.update()
            call.items = self.updates - before
        if self.first_update_at is None and self.updates > before:
            self.first_update_at = time.perf_counter()

    def efficiency(self) -> tuple[dict, dict]:
        """(metrics, null reasons): learner_tflops, the updates' achieved model FLOP/s."""
        counted = self.flops.flops_per_item
        m = {"learner_flops_per_update": counted} if counted is not None else {}
        tflops = self.flops.tflops()
        if tflops is None:
            return m, {"learner_tflops": self.flops.why_null("learner update")}
        return m | {"learner_tflops": tflops}, {}

    def may_update(self) -> bool:
        raise NotImplementedError

    def update(self) -> float:
        raise NotImplementedError

    def exhausted(self) -> bool:
        return False

    def metrics(self) -> dict:
        """The learner's own metrics beside updates and loss (e.g. V-trace's policy lag)."""
        return {}
