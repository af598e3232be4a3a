"""The pipeline model: throughput and task time from measured per-component costs (pure math).

`actor_rate` gives the actors' rate and its bound, `predict` the task's runtime and bound,
`paced` SEED's unroll queue update by update, `remote_rate` actor processes and hosts.
Costs, equations and assumptions: docs/predict.md, "The model's equations".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

ENV, INFERENCE, CORES, SYNC, LEARNER = "env stepping", "inference", "cores", "env stepping + inference", "learner"
PROCS, HOSTS, NETWORK = "actor processes", "actor hosts", "network"


@dataclass(frozen=True)
class Costs:
    env_step_s: float
    actor_threads: int
    infer_fixed_s: float
    infer_per_env_s: float
    update_s: float
    infer_threads: int = 0
    cores: int = 1
    loop_overhead: float = 1.0  # the actor loop's time per step / the composed one (measured; 1 = none)
    share_cores_actors: float = 0.0  # effective cores the actors see when sharing with the learner (0 = cores)
    share_cores_learner: float = 0.0  # effective cores the learner sees (0 = cores)

    def infer_s(self, batch: int) -> float:
        return self.infer_fixed_s + batch * self.infer_per_env_s


@dataclass(frozen=True)
class Prediction:
    sps: float
    actor_bound: str  # which stage bounds the actors' rate
    actors_s: float
    learner_s: float
    runtime_s: float
    bound: str  # what bounds the task: the actors' bound, or the learner
    phases: dict = field(default_factory=dict)  # seconds with only "actors", "both" or only "learner" running

    def fps(self, frameskip: int) -> float:
        return self.sps * frameskip


@dataclass(frozen=True)
class UnrollQueue:
    """SEED RL's coupling of inference and the learner, in unrolls (docs/predict.md, "The model's equations")."""

    capacity: int
    take: int
    first_take: int
    first_steps: int  # agent steps of an actor's first unroll
    stride: int  # agent steps between the starts of an actor's consecutive unrolls

    def steps_for(self, actors: int, unrolls: int) -> int:
        """Agent steps (all actors together) when `unrolls` unrolls exist."""
        return learner_start_steps(actors, max(unrolls, 1), self.first_steps, self.stride)

    def made(self, actors: int, steps: float) -> int:
        """Unrolls `steps` agent steps (all actors, in step) complete."""
        per_actor = int(steps // actors)
        return actors * (1 + (per_actor - self.first_steps) // self.stride) if per_actor >= self.first_steps else 0

    def task_unrolls(self, updates: int) -> int:
        """Unrolls the learner takes for `updates` updates (the actors step on until they exist)."""
        return self.first_take + (updates - 1) * self.take if updates > 0 else 0


@dataclass(frozen=True)
class Link:
    """The network between the actor hosts and the learner's host, each way: `bandwidth_bps`
    bits per second (inf: a loopback that adds nothing) and `latency_s` one way."""

    bandwidth_bps: float = math.inf
    latency_s: float = 0.0

    def seconds(self, nbytes: float) -> float:
        return 8 * nbytes / self.bandwidth_bps if math.isfinite(self.bandwidth_bps) else 0.0


@dataclass(frozen=True)
class Remote:
    """Envs stepped in actor processes over the actor protocol (rlbench/remote/), each process
    lock-stepping its envs and sending one message per vector step (SEED's actor). Per message
    of k envs (a line each, from the profile's RPC measurement, rlbench/predict/rpc.py):
    actor_s(k) CPU seconds on the actor's side, server_s(k) on the learner host's (gRPC,
    decoding, frame stacks), bytes_up(k) / bytes_down(k) message bytes each way."""

    procs: int  # actor processes (actor_procs, or one per actor host)
    threads: int  # hardware threads each process steps its envs on
    hosts: int  # 0: the processes share the learner's host; H: one on each of H actor hosts
    host_cpus: int  # hardware threads of an actor host (hosts > 0)
    actor_s: tuple[float, float]  # (fixed per message, per env)
    server_s: tuple[float, float]
    bytes_up: tuple[float, float]
    bytes_down: tuple[float, float] = (0.0, 0.0)
    link: Link = Link()
    start_s: float = 0.0  # seconds until a process has started and joined (before the envs' reset)

    @staticmethod
    def line(fit: tuple[float, float], k: float) -> float:
        return fit[0] + fit[1] * k


def remote_rate(c: Costs, r: Remote, actors: int, batch: int = 0, eval_envs: int = 0) -> tuple[float, str]:
    """(training agent steps per second, the stage that bounds it) with the envs in actor
    processes (docs/predict.md, "The network"). n = actors + eval_envs envs, e = n / procs per
    process; central inference takes whole messages, m = min(procs, ceil(batch / e)) of them
    (b = m e envs) per forward (batch 0 or >= n: all). The stages, in env steps per second:
      processes  procs e / cycle, cycle = e env_step_s / min(threads, e) + actor_s(e)
                 + link(bytes_up(e) + bytes_down(e)) + 2 latency + m server_s(e) + infer(b)
                 (a process lock-steps: it waits for its round trip, its forward included)
      inference  b / (infer(b) + m server_s(e))      (the job's driver thread and the GIL)
      network    bandwidth / 8 / (bytes_up(e) / e)   (the learner host's link, actor hosts only)
      cores      of the learner's host: cores / (infer_threads infer(b) / b + server_s(e) / e
                 [+ env_step_s + actor_s(e) / e where the processes share it]); of the actor
                 hosts: hosts host_cpus / (env_step_s + actor_s(e) / e)
    each / g (the loop overhead), scaled to the training envs by actors / n."""
    if actors < 1 or r.procs < 1 or r.threads < 1 or eval_envs < 0:
        raise ValueError(
            f"actors={actors}, procs={r.procs}, threads={r.threads} must be >= 1, eval_envs={eval_envs} >= 0"
        )
    n = actors + eval_envs
    e = n / r.procs
    m = r.procs if batch <= 0 or batch >= n else min(r.procs, math.ceil(batch / e))
    b = m * e
    a, s = r.line(r.actor_s, e), r.line(r.server_s, e)
    up, down = r.line(r.bytes_up, e), r.line(r.bytes_down, e)
    cycle = (
        e * c.env_step_s / min(r.threads, e)
        + a
        + r.link.seconds(up + down)
        + 2 * r.link.latency_s
        + m * s
        + c.infer_s(b)
    )
    caps = {HOSTS if r.hosts else PROCS: r.procs * e / cycle, INFERENCE: b / (c.infer_s(b) + m * s)}
    if r.hosts and math.isfinite(r.link.bandwidth_bps):
        caps[NETWORK] = r.link.bandwidth_bps / 8 / (up / e)
    if r.hosts:
        caps[f"{CORES} of the actor hosts"] = r.hosts * r.host_cpus / (c.env_step_s + a / e)
    if c.cores:
        caps[CORES] = c.cores / learner_host_s(c, r, n, b, e)
    bound = min(caps, key=caps.get)
    return caps[bound] * actors / n / c.loop_overhead, bound


def learner_host_s(c: Costs, r: Remote, n: int, b: float, e: float) -> float:
    """CPU seconds on the learner's host per env step with actor processes: its share of a
    forward on infer_threads threads and of the server's work per message, plus, where the
    processes run on that host (hosts 0), the env step and the actor's side of the message."""
    own = c.infer_threads * c.infer_s(b) / b + r.line(r.server_s, e) / e
    return own if r.hosts else own + c.env_step_s + r.line(r.actor_s, e) / e


def forward_envs(r: Remote | None, n: int, batch: int) -> float:
    """Envs per forward: the resolved batch (0 or >= n: all) or, with actor processes, whole
    messages of n / procs envs until it is reached."""
    if r is None:
        return n if batch <= 0 or batch >= n else batch
    e = n / r.procs
    return n if batch <= 0 or batch >= n else min(r.procs, math.ceil(batch / e)) * e


def actor_rate(
    c: Costs, actors: int, batch: int = 0, eval_envs: int = 0, remote: Remote | None = None
) -> tuple[float, str]:
    """(training agent steps per second, the stage that bounds it); docs/predict.md, "The model's equations".
    `eval_envs` evaluation envs step and infer alongside the actors (a job's eval_envs) but
    their steps do not count: the rate of all envs is scaled by actors / (actors + eval_envs).
    `remote`: the envs step in actor processes (remote_rate)."""
    if remote is not None:
        return remote_rate(c, remote, actors, batch, eval_envs)
    if actors < 1 or c.actor_threads < 1 or eval_envs < 0:
        raise ValueError(f"actors={actors}, actor_threads={c.actor_threads} must be >= 1, eval_envs={eval_envs} >= 0")
    n = actors + eval_envs
    parallel = min(c.actor_threads, n)
    g = c.loop_overhead
    if batch <= 0 or batch >= n:
        return actors / (g * (n * c.env_step_s / parallel + c.infer_s(n))), SYNC
    capacities = {ENV: parallel / c.env_step_s, INFERENCE: batch / c.infer_s(batch)}
    if c.cores:
        capacities[CORES] = c.cores / (c.env_step_s + c.infer_threads * c.infer_s(batch) / batch)
    bound = min(capacities, key=capacities.get)
    return capacities[bound] * actors / n / g, bound


def reset_in_clock(start_s: float, actors: int, batch: int, eval_envs: int = 0) -> float:
    """Seconds of the envs' first reset inside the job's stepping clock (fps = frames / that
    clock): an asynchronous AtariVectorEnv's reset returns once the first `batch` envs are
    reset, and its threads reset the others while the clock runs, so (n - batch) / n of it."""
    n = actors + eval_envs
    return start_s * (n - batch) / n if 0 < batch < n else 0.0


def learner_start_steps(actors: int, wanted: int, length: int, stride: int) -> int:
    """Agent steps (all actors together) before `wanted` unrolls exist, the actors stepping in
    step: an actor's first unroll needs `length` steps, each later one `stride` more (R2D2:
    length burn_in + seq_len + 1, stride length - overlap, wanted min_replay; V-trace: length
    unroll_length + 1, stride unroll_length, wanted batch_size)."""
    if min(actors, wanted, length, stride) < 1:
        raise ValueError(f"actors={actors}, wanted={wanted}, length={length}, stride={stride} must be >= 1")
    per_actor = -(-wanted // actors)  # ceil: unrolls each actor must finish
    return actors * (length + (per_actor - 1) * stride)


def actor_cores(
    c: Costs, actors: int, batch: int, sps: float, eval_envs: int = 0, remote: Remote | None = None
) -> float:
    """Cores the actors and central inference keep busy on the learner's host at `sps`
    training steps/s: each env step costs env_step_s of an env thread and its share of a
    forward on infer_threads threads; the eval envs add their steps in proportion. With actor
    processes, what each env step costs that host (learner_host_s)."""
    n = actors + eval_envs
    b = forward_envs(remote, n, batch)
    per_step = (
        c.env_step_s + c.infer_threads * c.infer_s(b) / b
        if remote is None
        else learner_host_s(c, remote, n, b, n / remote.procs)
    )
    return sps * n / actors * c.loop_overhead * per_step


def predict(
    c: Costs,
    actors: int,
    frames: int,
    frameskip: int,
    updates: int,
    batch: int = 0,
    learner_start_steps: int = 0,
    learner_threads: int = 0,
    steps_per_update: float = 0.0,
    eval_envs: int = 0,
    start_s: float = 0.0,
    queue: UnrollQueue | None = None,
    remote: Remote | None = None,
) -> Prediction:
    """The task's time in three phases after `start_s` (the envs' first reset, before any
    step; `sps` and fps count the stepping only, as the job's fps does): the actors alone until the
    learner may start; both
    together, each slowed by the share of the cores it gets when their demand exceeds the
    host's (`learner_threads` > 0 and `cores` > 0: processor sharing, both slowed by
    cores / demand); then whichever is left, alone again.

    While the actors run, the learner may also wait for data: `steps_per_update` agent steps
    per update (R2D2: batch_size x stride / samples_per_insert; V-trace: batch_size x
    unroll_length; 0 = never waits). Its rate is then share x min(1 / update_s,
    sps / steps_per_update), and while it waits it keeps no core busy, so its demand is
    learner_threads x min(1, sps x update_s / steps_per_update) (the share cancels).

    `queue` (SEED's unroll queue; None = no coupling): the task is followed update by update
    (`paced`), the actors stepping on past the frames until the learner has its unrolls.
    `remote`: the envs step in actor processes (remote_rate; their reset is whole before the
    first step: the job's reset returns once every process sent its first frames)."""
    sps0, actor_bound = actor_rate(c, actors, batch, eval_envs, remote)
    steps = frames / frameskip
    lag = reset_in_clock(start_s, actors, batch, eval_envs) if remote is None else 0.0
    t1 = min(learner_start_steps, steps) / sps0
    left = steps - min(learner_start_steps, steps)
    if not updates:
        t = start_s + steps / sps0
        return Prediction(
            steps / (steps / sps0 + lag),
            actor_bound,
            t,
            0.0,
            t,
            actor_bound,
            {"actors": t, "both": 0.0, "learner": 0.0},
        )
    busy = min(1.0, sps0 * c.update_s / steps_per_update) if steps_per_update > 0 else 1.0
    share_a = share_l = 1.0
    if c.cores and learner_threads:
        demand = actor_cores(c, actors, batch, sps0, eval_envs, remote) + learner_threads * busy
        share_a = min(1.0, (c.share_cores_actors or c.cores) / demand)
        share_l = min(1.0, (c.share_cores_learner or c.cores) / demand)
    sps_s = sps0 * share_a
    update_rate = share_l / c.update_s
    if steps_per_update > 0:
        update_rate = min(update_rate, sps_s / steps_per_update)
    if queue is not None and steps_per_update > 0:
        n = actors + eval_envs
        group = max(1, int(forward_envs(remote, n, batch) * actors // n))  # training envs per forward
        return paced(c, queue, actors, steps, updates, (sps0, actor_bound), sps_s, share_l, start_s, group, lag)
    if left / sps_s <= updates / update_rate:  # the actors finish first: a learner tail, alone
        t2 = left / sps_s
        actors_s = t1 + t2
        learner_s = actors_s + (updates - t2 * update_rate) * c.update_s
    else:  # the learner finishes first; the actors go on alone
        t2 = updates / update_rate
        learner_s = t1 + t2
        actors_s = learner_s + (left - t2 * sps_s) / sps0
    bound = LEARNER if learner_s > actors_s else actor_bound
    alone = abs(actors_s - learner_s)  # the third phase: whichever is left runs alone
    phases = {
        "actors": start_s + t1 + (alone if actors_s > learner_s else 0.0),
        "both": t2,
        "learner": alone if learner_s > actors_s else 0.0,
    }
    return Prediction(
        steps / (actors_s + lag),
        actor_bound,
        start_s + actors_s,
        start_s + learner_s,
        start_s + max(actors_s, learner_s),
        bound,
        phases,
    )


def paced(
    c: Costs,
    q: UnrollQueue,
    actors: int,
    frame_steps: float,
    updates: int,
    rate: tuple[float, str],
    sps_s: float,
    share_l: float,
    start_s: float,
    group: int = 0,
    lag: float = 0.0,
) -> Prediction:
    """The task under SEED's unroll queue, update by update (docs/predict.md). The actors step the
    frames' steps, or more where the learner's unrolls need more, and are done when every
    unroll they made is in the queue; `rate`: their rate alone and its bound; `sps_s`,
    `share_l`: their rate and the learner's share of its speed while both run; `group`: the
    training envs one forward serves (unrolls are put a forward's at a time; 0 = all); `lag`:
    the reset inside the stepping clock (reset_in_clock)."""
    sps0, actor_bound = rate
    wanted = q.task_unrolls(updates)
    steps = max(frame_steps, float(q.steps_for(actors, wanted)))
    put = q.made(actors, frame_steps)  # every unroll the frames make; past them, forwards until the learner has its own
    if put < wanted:
        group = group or actors
        put = min(put + -(-(wanted - put) // group) * group, q.made(actors, steps))
    x = min(float(q.steps_for(actors, q.first_take)), steps)
    t = x / sps0  # the actors alone until the first take exists
    phase = {"actors": t, "both": 0.0, "learner": 0.0}
    consumed, done_s, j = q.first_take, None, 0
    while j < updates and done_s is None:
        free = consumed + q.capacity >= put  # the queue has room for every unroll left
        limit = steps if free else min(steps, float(q.steps_for(actors, consumed + q.capacity + 1)))
        tc = min(max(limit - x, 0.0) / sps_s, c.update_s / share_l)  # both run; then the learner alone
        u = tc + c.update_s - tc * share_l
        x += tc * sps_s
        done_s = t + tc if free and x >= steps else None
        phase["both"] += tc
        phase["learner"] += u - tc
        t, j = t + u, j + 1
        consumed += q.take
        need = min(float(q.steps_for(actors, consumed)), steps)  # the next take's unrolls
        if j < updates and x < need:  # the learner waits; the actors step alone
            t, phase["actors"], x = t + (need - x) / sps0, phase["actors"] + (need - x) / sps0, need
    if done_s is None:  # the learner is done first (or ran out of updates): the actors go on alone
        done_s = t + (steps - x) / sps0
        phase["actors"] += (steps - x) / sps0
    learner_s = t + (updates - j) * c.update_s
    phase["learner"] += (updates - j) * c.update_s
    phase["actors"] += start_s
    bound = LEARNER if learner_s > done_s else actor_bound
    return Prediction(
        steps / (done_s + lag),
        actor_bound,
        start_s + done_s,
        start_s + learner_s,
        start_s + max(done_s, learner_s),
        bound,
        phase,
    )
