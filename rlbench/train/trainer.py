"""The SEED-style trainer, wired in one place, for any algorithm in rlbench/algo/.

actors --StepBatch--> inference --unrolls--> the algorithm's buffer --> learner --weights--> inference.
`build_trainer` is the only place the roles are created and connected; `train` runs them to the
end of the workload and returns the job's final metrics. docs/algorithms.md.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rlbench.core.observers import Observers
from rlbench.core.precision import Amp
from rlbench.envs.shelf import SHELF, shelf_key
from rlbench.prepare.plan import JobPlan, out_of_process
from rlbench.remote.job_actors import JobActors
from rlbench.roles.actors import ActorRole
from rlbench.roles.contract import AlgoContext, AlgoParts, layout_of
from rlbench.roles.inference import InferenceServer
from rlbench.roles.learner import LearnerLoop
from rlbench.roles.runner import Window, run_roles
from rlbench.telemetry.timing import OpTimer


@dataclass(frozen=True)
class EnvsGot:
    """The part of a job's start spent getting its envs: made (ale-py makes Atari emulators one
    after another) or taken from the job before in this process (envs/shelf.py)."""

    seconds: float
    made: bool


@dataclass
class Trainer:
    env: object
    parts: AlgoParts
    inference: InferenceServer
    actors: ActorRole
    learner: LearnerLoop | None
    device: torch.device
    role_walls: dict = field(default_factory=dict)  # role -> thread wall seconds, set at the end
    started: float | None = None  # perf_counter when the task started, set at the end (the steady rates' origin)
    shelf_key: tuple | None = None  # set where the env may serve the next job of this process
    envs_got: EnvsGot | None = None  # how the start got its envs (None: actor processes made their own)

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
        since = window.t  # the window's start
        rates = window.rates(now, {"steps": self.actors.steps, "updates": self.updates()})
        m = {
            "frames": self.actors.frames,
            "learner_updates": self.updates(),
            **self.parts.metrics(False),
            **self.inference.stats(),
            **self.actors.fault_metrics(),
        }
        # windowed rates only while they are true: over the part of the window the actors stepped
        # (after their first reset), where that is at least half of it; the learner running
        stepping, length = self.actors.stepping_since, now - since
        span = now - max(since, stepping) if stepping is not None else 0.0
        if span > 0 and span >= length / 2 and not self.actors.done.is_set():
            sps = rates["steps"] * length / span
            m |= {"window/fps": sps * self.actors.frameskip, "window/sps": sps}
        if self.learner is not None and not self.learner.finished.is_set():
            m["window/learner_updates_per_s"] = rates["updates"]
        if self.learner is not None and self.learner.updates:
            m["loss"] = self.learner.last_loss
            m |= self.learner.metrics()
        return m

    def measured(self, runtime_s: float, role_wall_s: dict, started: float | None = None) -> dict:
        """started: perf_counter when the task started (for actors_done_s)."""
        self.role_walls = dict(role_wall_s)
        self.started = started
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
            **self.actors.fault_metrics(),
        }
        if started is not None and self.actors.stepping_until is not None:
            m["actors_done_s"] = self.actors.stepping_until - started
        if self.learner is not None and self.learner.intra_op_threads is not None:
            m["learner_intra_op_threads"] = self.learner.intra_op_threads
        if self.learner is not None:
            m["learner_updates_per_s"] = self.updates() / learner_s if learner_s > 0 else float("nan")
            m["loss"] = self.learner.last_loss
            m |= self.learner.metrics()
        return m | self.time_shares(runtime_s, learner_s) | self.efficiency()[0]

    def efficiency(self) -> tuple[dict, dict]:
        """(achieved model TFLOP/s of the learner and of central inference, null reasons)."""
        roles = [r for r in (self.inference, self.learner) if r is not None]
        parts = [r.efficiency() for r in roles]
        return {k: v for m, _ in parts for k, v in m.items()}, {k: v for _, w in parts for k, v in w.items()}

    def hot_path_tags(self) -> dict[str, str]:
        """The mode each hot path ran in, any fallback to eager (rlbench/roles/hot_path.py), and
        the layout of a convolutional torso (`hot_path/memory_format`; none without one)."""
        learner = getattr(self.learner, "hot", None)
        tags = self.inference.hot_path_tags() | (learner.tags() if learner is not None else {})
        net = getattr(self.parts.policy.shared, "net", None)
        layout = layout_of(net) if net is not None else None
        return tags | ({"hot_path/memory_format": layout} if layout is not None else {})

    def time_shares(self, runtime_s: float, learner_s: float) -> dict:
        """RL-Scope's question: what share of the task's runtime went to simulation (the actors'
        env stepping) and to the learner (its wall time less its waiting)."""
        if runtime_s <= 0:
            return {}
        m = {"sim_share": self.actors.timer.totals.get("env_step", 0.0) / runtime_s}
        if self.learner is not None:
            m["learner_share"] = max(learner_s - self.learner.timer.totals.get("wait", 0.0), 0.0) / runtime_s
        return m

    def close(self, ended_well: bool = False) -> None:
        """Shelve the env for the next job of the same spec (envs/shelf.py) if this job ended
        well and its actors stopped stepping it, else close it; a job that ended well releases
        what its algorithm keeps for the next job (R2D2: replay's memory)."""
        if ended_well and self.shelf_key is not None and self.actors.done.is_set():
            SHELF.shelve(self.shelf_key, self.env, self.shelf_key[2])
        else:
            self.env.close()
        if ended_well and self.parts.release is not None:
            self.parts.release()


def job_env(plan: JobPlan) -> tuple[object, tuple | None, EnvsGot | None]:
    """The job's actors' env, its shelf key and how it was got: SEED's actor processes over gRPC
    (rlbench/remote/: no key, they make their own envs), else the env a job before left on the
    shelf for this spec, or a new one."""
    conf, envs = plan.conf, plan.envs
    if out_of_process(conf):
        return JobActors(conf, plan.spec, envs.total, plan.pin, plan.placement), None, None
    spec = (conf.env, envs.total, envs.actor_threads, conf.inference_batch, plan.pin)
    new: list = []  # the env make() made, if the shelf had none

    def make():
        new.append(plan.family.make(*spec, seed=conf.seed))
        return new[0]

    key, t0 = shelf_key(*spec), time.perf_counter()
    env = SHELF.take(key, make)
    return env, key, EnvsGot(time.perf_counter() - t0, made=bool(new))


def build_trainer(plan: JobPlan, timer: Callable[[str], OpTimer] = OpTimer) -> Trainer:
    """The roles of `plan`'s job, connected; `timer(role)` makes each role's timer (the job's
    telemetry makes them GPU-timed and traced)."""
    conf, envs = plan.conf, plan.envs
    torch.manual_seed(conf.seed)
    actors_done = threading.Event()
    ctx = AlgoContext(conf, plan.spec, plan.device, conf.actors, envs.eval, actors_done, timer)
    # the parts before the envs: what their build begins in the background (R2D2's replay zeroing) runs beside them
    parts = plan.build(ctx)
    env, key, got = job_env(plan)
    try:
        if (tuple(env.obs_shape), env.num_actions) != (plan.spec.obs_shape, plan.spec.num_actions):
            raise RuntimeError(
                f"env.id={conf.env.id}: the actors' env has obs {tuple(env.obs_shape)} and {env.num_actions} "
                f"actions, its probed spec {plan.spec.obs_shape} and {plan.spec.num_actions}"
            )
        inference = inference_server(parts, ctx, getattr(env, "inference_batch", None))
        actors = wire_actors(env, inference, parts, ctx, conf.workload.frames, conf.seed, actors_done)
        if parts.ready is not None:
            parts.ready()  # done before the actors' first step: a job's start holds all of its start-up
    except BaseException:
        env.close()  # no Trainer holds it yet: its emulators (or actor processes) end here
        raise
    return Trainer(env, parts, inference, actors, parts.learner, plan.device, shelf_key=key, envs_got=got)


def wire_inference(
    build: Callable[[AlgoContext], AlgoParts], ctx: AlgoContext, batch: int | None = None
) -> tuple[AlgoParts, InferenceServer]:
    """The algorithm's parts built for `ctx` and central inference on their policy, ready: the
    profile's measurements (rlbench/predict/measure.py) are made here and with inference_server,
    as a job's (build_trainer), so they time what a job runs."""
    parts = build(ctx)
    if parts.ready is not None:
        parts.ready()
    return parts, inference_server(parts, ctx, batch)


def inference_server(parts: AlgoParts, ctx: AlgoContext, batch: int | None = None) -> InferenceServer:
    """Central inference on the parts' policy, for ctx.actors + ctx.num_eval envs in the job's
    hot-path mode (`batch`: the envs per forward the job's env hands it; default all)."""
    envs = ctx.actors + ctx.num_eval
    mode = ctx.conf.hot_path.inference
    return InferenceServer(parts.policy, ctx.device, envs, ctx.actors, ctx.timer("inference"), mode, batch)


def wire_actors(
    env, inference: InferenceServer, parts: AlgoParts, ctx: AlgoContext, frames: int, seed: int, done=None
) -> ActorRole:
    """The actors on `env`, stepping through `inference` under the algorithm's flow control
    (may_step, more_data) until `frames`; once done (`done` is set) they ring the learner."""
    learner = parts.learner
    return ActorRole(
        env,
        inference,
        ctx.actors,
        frames,
        seed,
        ctx.num_eval,
        done,
        parts.may_step,
        parts.more_data,
        ctx.timer("actors"),
        on_done=learner.wakeup.ring if learner is not None else None,
    )  # it may update now


def train(plan: JobPlan, observers=(), timer: Callable[[str], OpTimer] = OpTimer) -> dict:
    """Run the plan's task under its compute grant, telling `observers` (rlbench/core/observers.py)
    of its life; returns the final metrics (runtime_s, fps, energy, op fractions...)."""
    watch = Observers(observers)
    error: BaseException | None = None
    try:
        with plan.compute, Amp(plan.conf.precision, plan.device.type).scope():  # tf32's flags
            trainer = build_trainer(plan, timer)
            try:
                watch.started(trainer)
                final = _run(plan, trainer, watch)
                result = final_metrics(plan, trainer, final, watch)
            except BaseException:
                trainer.close()
                raise
            trainer.close(ended_well=True)
            return result
    except BaseException as e:
        error = e
        raise
    finally:
        watch.closed(error)


def _run(plan: JobPlan, trainer: Trainer, watch: Observers) -> dict:
    def tick(metrics: dict, step: int) -> None:
        watch.tick(metrics, step, trainer)
        _drain_episodes(trainer.actors, watch)

    try:
        measured = run_roles(
            trainer, tick, plan.conf.tracking.log_every_s, plan.conf.workload.max_runtime_s, plan.compute.thread_scope
        )
        _drain_episodes(trainer.actors, watch)  # the episodes that ended after the last tick
        return measured
    finally:
        watch.stopped()


def final_metrics(plan: JobPlan, trainer: Trainer, measured: dict, watch: Observers) -> dict:
    """The job's final metrics, assembled here and only here: what the roles measured (the
    runner's `Trainer.measured`), what the observers add (energy, time per operation,
    episode returns), the task's replay ratio and the compute grant with the threads the
    actors used. The observers are then told (`ended`)."""
    final = dict(measured)
    added, tags = watch.final_values(final, trainer)
    # the bare forward is timed after the task and its energy (docs/metrics.md, inference_overhead)
    reference, unknown = trainer.inference.overhead(plan.compute.thread_scope)
    tags = {f"null/{k}": why for k, why in (trainer.efficiency()[1] | unknown).items()} | trainer.hot_path_tags() | tags
    final |= added | reference
    final["actor_threads_used"] = trainer.env.threads_used
    final |= (
        trainer.env.metrics() if hasattr(trainer.env, "metrics") else {}
    )  # actor processes' own (remote/job_actors.py)
    if plan.replay_ratio is not None:  # None: the algorithm has no learner (algo=random)
        final["task_replay_ratio"] = plan.replay_ratio
    final |= plan.grant_metrics(trainer.env.threads_used)
    watch.ended(final, tags)
    return final


def _drain_episodes(actors: ActorRole, watch: Observers) -> None:
    for returns, evaluation in ((actors.episode_returns, False), (actors.eval_returns, True)):
        while returns:
            frames, ret = returns.popleft()
            watch.episode(ret, frames, evaluation)
