"""The SEED-style R2D2 trainer, wired in one place.

actors --StepBatch--> inference (network copy, per-actor state, unroll assembly)
       --sequences--> replay <--sample/priorities-- learner --weights--> inference

`build_trainer` is the only place the roles are created and connected; `train` runs them
to the end of the workload and returns the job's final metrics.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch

from rlbench.algo.network import R2D2Net
from rlbench.algo.r2d2_sequences import actor_epsilons, unroll_layout
from rlbench.algo.replay import SequenceReplay
from rlbench.algo.unrolls import UnrollAssembler
from rlbench.config.derived import replay_capacity, sequence_bytes
from rlbench.config.schema import Config
from rlbench.envs.spec import env_spec
from rlbench.envs.vector import make_actors
from rlbench.progress import Progress
from rlbench.resources import ComputeLimit, usable_cpus
from rlbench.roles.actors import ActorRole
from rlbench.roles.inference import InferenceServer
from rlbench.roles.learner import LearnerRole
from rlbench.runner import Window, run_roles
from rlbench.telemetry.job_telemetry import JobTelemetry


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass
class Trainer:
    env: object
    replay: SequenceReplay
    inference: InferenceServer
    actors: ActorRole
    learner: LearnerRole | None
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
            "fps": rates["steps"] * self.actors.frameskip,
            "sps": rates["steps"],
            "learner_updates_per_s": rates["updates"],
            "frames": self.actors.frames,
            "learner_updates": self.updates(),
            "replay_size": self.replay.size,
            **self.inference.stats(),
        }
        if self.replay.inserted:
            m["replay_ratio"] = self.replay.sampled / self.replay.inserted
        if self.learner is not None and self.learner.updates:
            m["loss"] = self.learner.last_loss
        return m

    def final_metrics(self, runtime_s: float, role_wall_s: dict) -> dict:
        self.role_walls = dict(role_wall_s)
        actor_s = max(self.actors.stepping_s(), 1e-9)
        learner_s = role_wall_s.get("learner", 0.0)
        m = {
            "runtime_s": runtime_s,
            "fps": self.actors.frames / actor_s,
            "sps": self.actors.steps / actor_s,
            "frames": self.actors.frames,
            "learner_updates": self.updates(),
            "episodes": self.actors.episodes,
            "eval_frames": self.actors.eval_frames,
            "replay_memory_gb": self.replay.nbytes() / 1e9,
            "replay_capacity": self.replay.capacity,
            **self.inference.stats(),
        }
        if self.replay.inserted:  # sampled / inserted sequences (unknown before the first insert)
            m["replay_ratio"] = self.replay.sampled / self.replay.inserted
        if self.learner is not None and self.learner.intra_op_threads is not None:
            m["learner_intra_op_threads"] = self.learner.intra_op_threads
        if self.learner is not None:
            m["learner_updates_per_s"] = self.updates() / learner_s if learner_s > 0 else float("nan")
            m["loss"] = self.learner.last_loss
        return m

    def close(self) -> None:
        self.env.close()


def build_trainer(conf: Config, gpu_busy=None) -> Trainer:
    algo, device = conf.algo, resolve_device(conf.device)
    torch.manual_seed(conf.seed)
    threads = conf.actor_threads or len(usable_cpus())
    pin = usable_cpus()[0] if conf.actor_threads else -1  # an explicit thread count is also pinned
    n_eval = conf.eval_envs if conf.policy == "r2d2" else 0  # eval measures a learned policy
    env = make_actors(conf.env, conf.actors + n_eval, threads, conf.inference_batch, pin)
    length, overlap = unroll_layout(algo.burn_in, algo.seq_len, algo.overlap)
    obs_shape, n_act, hidden = env.obs_shape, env.num_actions, algo.network.lstm_hidden
    spec = env_spec(conf.env)  # what validate sized replay with; the built env must agree with it
    if (tuple(obs_shape), n_act) != (spec.obs_shape, spec.num_actions):
        raise RuntimeError(f"env.id={conf.env.id}: the actors' env has obs {tuple(obs_shape)} and {n_act} actions, "
                           f"its probed spec {spec.obs_shape} and {spec.num_actions}")
    stack = spec.stack
    assembler = UnrollAssembler(conf.actors, length, overlap, obs_shape, env.obs_dtype, n_act, hidden, stack)
    capacity = replay_capacity(conf, sequence_bytes(conf, spec))
    replay = SequenceReplay.for_shapes(
        capacity, length, obs_shape, env.obs_dtype, n_act, hidden, stack,
        alpha=algo.priority_exponent, beta=algo.importance_exponent, seed=conf.seed,
        prefault=algo.replay_prefault,
    )
    acting_net = R2D2Net(obs_shape, n_act, algo.network).to(device) if conf.policy == "r2d2" else None
    epsilons = np.concatenate([actor_epsilons(conf.actors, algo.eps_base, algo.eps_alpha),
                               np.full(n_eval, conf.eval_epsilon)])
    inference = InferenceServer(acting_net, device, epsilons, assembler, replay, algo, conf.seed, conf.policy,
                                num_train=conf.actors)
    actors = ActorRole(env, inference, conf.actors, conf.workload.frames, conf.seed, n_eval)
    learner = None
    if conf.learner and conf.policy == "r2d2":
        learning_net = R2D2Net(obs_shape, n_act, algo.network).to(device)
        learning_net.load_state_dict(acting_net.state_dict())
        learner = LearnerRole(learning_net, algo, replay, inference, device, conf.workload.learner_updates, actors.done)
        if algo.rate_limit == "both":
            actors.may_insert = learner.actors_may_insert
    for role in (actors, inference, learner):
        if role is not None:
            role.timer.gpu = gpu_busy
    return Trainer(env, replay, inference, actors, learner, device)


def train(conf: Config, log_metrics=lambda metrics, step: None, on_episode=None,
          telemetry: JobTelemetry | None = None, set_tags=lambda tags: None,
          compute: ComputeLimit | None = None, on_eval_episode=None) -> dict:
    """Run the whole task; returns the final metrics (runtime_s, fps, energy, op fractions...)."""
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
            telemetry.start()
        try:
            scope = compute.thread_scope if compute is not None else contextlib.nullcontext
            final = run_roles(trainer, log_tick, progress, conf.tracking.log_every_s,
                              conf.workload.max_runtime_s, scope)
        finally:
            if telemetry is not None:
                telemetry.stop()
        _drain_episodes(trainer.actors, on_episode, on_eval_episode)
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
