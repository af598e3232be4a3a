"""The actors (SEED RL's thin actors): step the environments, ask central inference, repeat.

One driver thread owns the vector env, whose own threads step it; the role counts the training
actors' steps, frames and returns, the evaluation envs' apart, and what departed actor
processes cost (`fault_metrics`). docs/algorithms.md; docs/actors.md, "A departure, as the actors see it".
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np

from rlbench.envs.vector import VectorEnv
from rlbench.roles.inference import InferenceServer
from rlbench.telemetry.timing import OpTimer


class ActorRole:
    name = "actors"

    def __init__(
        self,
        env: VectorEnv,
        inference: InferenceServer,
        actors: int,
        frame_target: int,
        seed: int,
        eval_envs: int = 0,
        done: threading.Event | None = None,
        may_step=None,
        more_data=None,
        timer: OpTimer | None = None,
        on_done=None,
    ):
        self.env, self.inference = env, inference
        self.frame_target, self.seed, self.actors = frame_target, seed, actors
        self.frameskip = env.frameskip
        self.steps = 0  # training actors' agent steps (frames = steps * frameskip)
        self.eval_steps = 0
        self.episode_returns: collections.deque = collections.deque()  # (frames, return), drained
        self.eval_returns: collections.deque = collections.deque()  # (frames, return) of eval envs, drained
        self.episodes = 0
        self._running_return = np.zeros(actors + eval_envs, dtype=np.float64)
        self.timer = timer or OpTimer("actors")
        self.stepping_since: float | None = None  # perf_counter after the first reset
        self.stepping_until: float | None = None
        self.first_step_at: float | None = None  # perf_counter after the first step (its inference forward included)
        self.may_step = may_step  # the algorithm's flow control: actors wait while it returns False
        self.more_data = more_data  # the algorithm still needs unrolls past the frame target while it returns True
        self.done = done if done is not None else threading.Event()  # set when the actors stop
        self.on_done = on_done  # called once `done` is set (the trainer rings the learner's wakeup)
        self.reports_disconnects = callable(getattr(env, "take_disconnected", None))
        self.disconnects = 0  # calls of take_disconnected that returned ids (one per leave seen between two recvs)
        self.lost_steps = 0  # training steps received from envs whose process left, in no emitted unroll
        self._rejoining = np.zeros(actors + eval_envs, dtype=bool)  # forgotten; their next done ends nothing
        self._rejoin_pending = False

    @property
    def frames(self) -> int:
        return self.steps * self.frameskip

    def run(self, stop: threading.Event) -> None:
        with self.timer.op("env_step"):
            batch = self.env.reset(seed=self.seed)
        self.stepping_since = time.perf_counter()
        while not stop.is_set() and (
            self.frames < self.frame_target or (self.more_data is not None and self.more_data())
        ):
            if self.may_step is not None and not self.may_step():
                with self.timer.op("rate_limited"):
                    stop.wait(0.001)
                continue
            with self.timer.op("inference"):
                actions = self.inference.step(batch)
            with self.timer.op("env_step"):
                self.env.send(actions)
                batch = self.env.recv()
                gone = self.env.take_disconnected() if self.reports_disconnects else None
            if gone is not None and len(gone):
                self._forget(gone)
            self._account(batch)
            if self.first_step_at is None:
                self.first_step_at = time.perf_counter()
        self.stepping_until = time.perf_counter()
        self.done.set()
        if self.on_done is not None:
            self.on_done()

    def stepping_s(self) -> float:
        """Seconds spent stepping (after the environments' first reset): fps = frames / this."""
        if self.stepping_since is None:
            return 0.0
        return (self.stepping_until or time.perf_counter()) - self.stepping_since

    @property
    def eval_frames(self) -> int:
        return self.eval_steps * self.frameskip

    def fault_metrics(self) -> dict:
        """actor_disconnects and actor_lost_steps where the actors can leave (the env reports
        it); none for in-process actors, which cannot: null there, not a measured 0."""
        if not self.reports_disconnects:
            return {}
        return {"actor_disconnects": self.disconnects, "actor_lost_steps": self.lost_steps}

    def _forget(self, gone) -> None:
        ids = np.unique(np.asarray(gone, dtype=np.int64))
        with self.timer.op("inference"):
            self.lost_steps += self.inference.forget(ids)
        self.disconnects += 1
        self._running_return[ids] = 0.0
        self._rejoining[ids] = True
        self._rejoin_pending = True

    def _account(self, batch) -> None:
        ids = batch.env_ids
        trained = int((ids < self.actors).sum())
        self.steps += trained
        self.eval_steps += len(ids) - trained
        self._running_return[ids] += batch.reward
        ends = batch.done
        if self._rejoin_pending:  # rare: only after a disconnect, so the common step pays one branch
            ends = ends & ~self._rejoining[ids]
            self._rejoining[ids] = False
            self._rejoin_pending = bool(self._rejoining.any())
        ended = ids[ends]
        if ended.size:
            for i, r in zip(ended.tolist(), self._running_return[ended].tolist(), strict=True):
                (self.episode_returns if i < self.actors else self.eval_returns).append((self.frames, r))
            self.episodes += int((ended < self.actors).sum())
            self._running_return[ended] = 0.0
        # a rejoined env's first step (done, ending nothing) starts from the 0 _forget left: its
        # reset step's reward is 0, so the common step pays no extra write
