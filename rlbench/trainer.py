"""The SEED-style trainer, wired in one place, for any algorithm in rlbench/algo/.

actors --StepBatch--> inference (the algorithm's acting policy, per-env state, unrolls)
       --unrolls--> the algorithm's buffer (R2D2: replay; V-trace: a FIFO) --> learner
       learner --weights--> inference

`build_trainer` is the only place the roles are created and connected; `train` runs them
to the end of the workload and returns the job's final metrics.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from rlbench.algo import algorithm, config_module
from rlbench.algo.common.parts import AlgoContext, AlgoParts
from rlbench.config.schema import Config
from rlbench.envs.spec import env_spec
from rlbench.envs.vector import make_actors
from rlbench.progress import Progress
from rlbench.resources import ComputeLimit, resolve_device, usable_cpus
from rlbench.roles.actors import ActorRole
from rlbench.roles.inference import InferenceServer
from rlbench.roles.learner import LearnerLoop
from rlbench.runner import Window, run_roles
from rlbench.telemetry.job_telemetry import JobTelemetry


@dataclass
class Trainer:
    env: object
    parts: AlgoParts
    inference: InferenceServer
    actors: ActorRole
    learner: LearnerLoop | None
    device: torch.device
    role_walls: dict = field(default_factory=dict)  # role -> thread wall seconds, set at the end

    def roles(self) -> list:
        return [self.actors] + ([self.learner] if self.learner is not None else [])

    def timers(self) -> list:
        return [r.timer for r in (self.actors, self.inference, self.learner) if r is not None]

    def op_walls(self) -> dict[str, float]:
        """Wall time of each timed role; inference runs inside the actors' `inference` op."""
        walls = dict(self.role_walls)
        walls["inference"] = self.actors.timer.totals.get("inference", 0.0)
        return walls

    def updates(self) -> int:
        return self.learner.updates if self.learner is not None else 0

    def step_metrics(self, window: Window, now: float) -> dict:
        rates = window.rates(now, {"steps": self.actors.steps, "updates": self.updates()})
        m = {
            "frames": self.actors.frames,
            "learner_updates": self.updates(),
            **self.parts.metrics(False),
            **self.inference.stats(),
        }
        # windowed rates only while they are true: the actors stepping, the learner running
        if self.actors.stepping_since is not None and not self.actors.done.is_set():
            m |= {"window/fps": rates["steps"] * self.actors.frameskip, "window/sps": rates["steps"]}
        if self.learner is not None and not self.learner.finished.is_set():
            m["window/learner_updates_per_s"] = rates["updates"]
        if self.learner is not None and self.learner.updates:
            m["loss"] = self.learner.last_loss
            m |= self.learner.metrics()
        return m

    def final_metrics(self, runtime_s: float, role_wall_s: dict, started: float | None = None) -> dict:
        """started: perf_counter when the task started (for actors_done_s)."""
        self.role_walls = dict(role_wall_s)
        actor_s = max(self.actors.stepping_s(), 1e-9)
        learner_s = role_wall_s.get("learner", 0.0)
        m = {
            "runtime_s": runtime_s,
            "task_fps": self.actors.frames / runtime_s if runtime_s > 0 else float("nan"),
            "fps": self.actors.frames / actor_s,
            "sps": self.actors.steps / actor_s,
            "frames": self.actors.frames,
            "learner_updates": self.updates(),
            "episodes": self.actors.episodes,
            "eval_frames": self.actors.eval_frames,
            **self.parts.metrics(True),
            **self.inference.stats(),
        }
        if started is not None and self.actors.stepping_until is not None:
            m["actors_done_s"] = self.actors.stepping_until - started
        if self.learner is not None and self.learner.intra_op_threads is not None:
            m["learner_intra_op_threads"] = self.learner.intra_op_threads
        if self.learner is not None:
            m["learner_updates_per_s"] = self.updates() / learner_s if learner_s > 0 else float("nan")
            m["loss"] = self.learner.last_loss
            m |= self.learner.metrics()
        return m | self.time_shares(runtime_s, learner_s)

    def time_shares(self, runtime_s: float, learner_s: float) -> dict:
        """RL-Scope's question: what share of the task's runtime went to simulation (the actors'
        env stepping) and to the learner (its wall time less its waiting)."""
        if runtime_s <= 0:
            return {}
        m = {"sim_share": self.actors.timer.totals.get("env_step", 0.0) / runtime_s}
        if self.learner is not None:
            m["learner_share"] = max(learner_s - self.learner.timer.totals.get("wait", 0.0), 0.0) / runtime_s
        return m

    def close(self) -> None:
        self.env.close()


def build_trainer(conf: Config, gpu_busy=None) -> Trainer:
    device = resolve_device(conf.device)
    torch.manual_seed(conf.seed)
    threads = conf.actor_threads or len(usable_cpus())
    pin = usable_cpus()[0] if conf.actor_threads else -1  # an explicit thread count is also pinned
    n_eval = conf.eval_envs if config_module(conf.algo.name).LEARNS else 0  # eval measures a learned policy
    env = make_actors(conf.env, conf.actors + n_eval, threads, conf.inference_batch, pin)
    spec = env_spec(conf.env)  # what validate sized buffers with; the built env must agree with it
    if (tuple(env.obs_shape), env.num_actions) != (spec.obs_shape, spec.num_actions):
        raise RuntimeError(f"env.id={conf.env.id}: the actors' env has obs {tuple(env.obs_shape)} and "
                           f"{env.num_actions} actions, its probed spec {spec.obs_shape} and {spec.num_actions}")
    actors_done = threading.Event()
    parts = algorithm(conf.algo.name).build(AlgoContext(conf, spec, device, conf.actors, n_eval, actors_done))
    inference = InferenceServer(parts.policy, device, conf.actors + n_eval, num_train=conf.actors)
    actors = ActorRole(env, inference, conf.actors, conf.workload.frames, conf.seed, n_eval, done=actors_done)
    actors.may_step, actors.more_data = parts.may_step, parts.more_data
    for role in (actors, inference, parts.learner):
        if role is not None:
            role.timer.gpu = gpu_busy
    return Trainer(env, parts, inference, actors, parts.learner, device)


def train(conf: Config, log_metrics=lambda metrics, step: None, on_episode=None,
          telemetry: JobTelemetry | None = None, set_tags=lambda tags: None,
          compute: ComputeLimit | None = None, on_eval_episode=None, on_walls=lambda walls: None) -> dict:
    """Run the whole task; returns the final metrics (runtime_s, fps, energy, op fractions...).
    on_walls(role -> wall seconds of its timer): called once the roles have ended."""
    trainer = build_trainer(conf, gpu_busy=telemetry.gpu_busy if telemetry else None)
    updates = conf.workload.learner_updates if trainer.learner is not None else 0
    progress = Progress(conf.workload.frames, updates, conf.progress)

    def log_tick(metrics: dict, step: int) -> None:
        if telemetry is not None:
            metrics = {**metrics, **telemetry.tick(trainer.timers())}
        log_metrics(metrics, step)
        _drain_episodes(trainer.actors, on_episode, on_eval_episode)

    try:
        if telemetry is not None:
            telemetry.attach(trainer.timers())
            telemetry.start()
        try:
            scope = compute.thread_scope if compute is not None else contextlib.nullcontext
            final = run_roles(trainer, log_tick, progress, conf.tracking.log_every_s,
                              conf.workload.max_runtime_s, scope)
        finally:
            if telemetry is not None:
                telemetry.stop()
        _drain_episodes(trainer.actors, on_episode, on_eval_episode)
        on_walls(trainer.op_walls())
        if telemetry is not None:
            metrics, tags = telemetry.final(final, trainer.timers(), trainer.op_walls())
            final |= metrics
            set_tags(tags)
        final["actor_threads_used"] = trainer.env.threads_used
        if compute is not None:
            final |= compute.grant.metrics(trainer.env.threads_used)
        return final
    finally:
        trainer.close()


def _drain_episodes(actors: ActorRole, on_episode, on_eval_episode=None) -> None:
    for returns, callback in ((actors.episode_returns, on_episode), (actors.eval_returns, on_eval_episode)):
        while returns:
            frames, ret = returns.popleft()
            if callback is not None:
                callback(ret, frames)


def last_returns_mean(returns: list[float], k: int = 20) -> float:
    return float(np.mean(returns[-k:])) if returns else float("nan")
