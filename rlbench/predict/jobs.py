"""A job's configuration through the model: which costs apply, what the task asks of the
learner, and the predicted metrics under their contract names (docs/metrics.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlbench.core.algorithms import config_module
from rlbench.core.env_families import family
from rlbench.core.resources import cpu_gpu_ratio
from rlbench.predict import model
from rlbench.predict.curves import Profile, env_step_s, inference_s, reset_s, rpc_fit, sharing, update_s
from rlbench.predict.power import task_energy
from rlbench.prepare.plan import envs_of


@dataclass
class Machine:
    """The profiles a prediction combines: the actor side (env stepping, the host's cores) from
    `cpu`, inference and the learner from `gpu` (the same profile unless a what-if), and
    `threads`: the actor host's hardware threads when scaled (`--threads N`), else measured."""

    cpu: Profile
    gpu: Profile
    threads: int | None = None
    link: model.Link | None = None  # --link: between actor hosts and the learner's host (an estimate)
    actor_host_cpus: int | None = None  # --actor-host-cpus: an actor host's hardware threads

    @property
    def cores(self) -> int:
        return self.threads or self.cpu.hardware_threads

    def names(self) -> str:
        if self.cpu.run_id == self.gpu.run_id:
            return self.cpu.label()
        return f"actors: {self.cpu.label()}; inference and learner: {self.gpu.label()}"

    def caveats(self) -> list[str]:
        out = []
        if self.threads and self.threads != self.cpu.hardware_threads:
            out.append(
                f"estimate: the actor host scaled from {self.cpu.hardware_threads} to {self.threads} hardware "
                "threads, assuming env stepping scales linearly with threads (per-step cost as measured)"
            )
        if self.cpu.run_id != self.gpu.run_id and self.gpu.device == "cpu":
            out.append(
                "estimate: inference and the learner measured on another CPU host, assumed to share this "
                "host's cores as they did there"
            )
        return out


@dataclass
class JobPrediction:
    knobs: dict  # actors, actor_threads, sm_limit, inference_batch (envs per forward), precision as the job sees them
    cpu_gpu_ratio: float
    fps: float
    sps: float
    runtime_s: float
    actors_s: float
    learner_updates: int
    learner_updates_per_s: float | None
    bound: str
    actor_bound: str
    energy_per_task_j: float | None = None
    energy_reason: str = ""
    notes: list[str] = field(default_factory=list)
    phases: dict = field(default_factory=dict)  # seconds with only "actors", "both" or only "learner" running

    def row(self) -> dict:
        return {
            **self.knobs,
            "cpu_gpu_ratio": self.cpu_gpu_ratio,
            "fps": self.fps,
            "runtime_s": self.runtime_s,
            "learner_updates_per_s": self.learner_updates_per_s,
            "energy_per_task_j": self.energy_per_task_j,
            "bound": self.bound,
        }


def _algo_data(conf):
    """The algorithm's declared LearnerData (rlbench/algo/common/data.py), or None without a learner."""
    algo = config_module(conf.algo.name)
    return algo.learner_data(conf) if algo.LEARNS and conf.learner else None


def learner_data(conf) -> tuple[int, float]:
    """(agent steps before the learner may start, agent steps of data per update while the
    actors run) for the job's algorithm, from what it declares; (0, 0) without a learner."""
    d = _algo_data(conf)
    if d is None:
        return 0, 0.0
    return model.learner_start_steps(conf.actors, d.first_unrolls, d.first_steps, d.stride), float(d.steps_per_update)


def unroll_queue(conf) -> model.UnrollQueue | None:
    """The bounded queue that holds the actors to the learner (SEED's unroll queue), in
    unrolls; None where the algorithm declares none."""
    d = _algo_data(conf)
    if d is None or d.queue_unrolls is None:
        return None
    return model.UnrollQueue(
        d.queue_unrolls, round(d.steps_per_update / d.stride), d.first_unrolls, d.first_steps, d.stride
    )


def units(conf, m: Machine) -> int:
    """Compute units the job is granted: sm_limit, or all of the inference side's units."""
    if conf.sm_limit:
        return int(conf.sm_limit)
    total = m.gpu.tags.get("compute_units_total")
    return int(total) if total else m.gpu.hardware_threads


def predict_job(conf, m: Machine) -> JobPrediction:
    """The validated job config `conf` on machine `m`."""
    m.cpu.check_fits(conf, "actors")
    m.gpu.check_fits(conf, "learner")
    notes = m.caveats()
    u = units(conf, m)
    on_cpu = m.gpu.device == "cpu"
    planned = envs_of(conf, m.cores)  # the envs, threads and batch as the job's plan decides them on m
    threads, envs, batch = planned.actor_threads, planned.total, planned.inference_batch
    remote = remote_of(conf, m, envs, notes)
    step_threads, step_envs = (remote.threads, max(1, round(envs / remote.procs))) if remote else (threads, envs)
    # envs per forward: the batch, or with actor processes whole messages until it is reached
    forward = max(1, round(model.forward_envs(remote, envs, batch))) if remote else batch
    updates = int(conf.workload.learner_updates or 0) if conf.learner else 0
    upd = update_s(m.gpu, u, notes, updates) if updates else None
    if updates and upd is None:
        raise ValueError(
            f"{m.gpu.label()} has no learner-update timing (profiled with --updates 0); the job "
            f"needs {updates} updates; allowed: a profile with updates, or learner=false"
        )
    shared = sharing(m.gpu, u, notes) if m.cpu.run_id == m.gpu.run_id and not m.threads else None
    if shared is None and updates and on_cpu:
        why = (
            "the profile's co-run does not describe a scaled or combined machine"
            if m.threads or m.cpu.run_id != m.gpu.run_id
            else "the profile has no co-run"
        )
        notes.append(
            f"estimate: {why}, so the actors and the learner share the cores ideally (processor sharing, "
            "no loop overhead)"
        )
    overhead, cores_a, cores_l = shared or (1.0, 0.0, 0.0)
    costs = model.Costs(
        env_step_s=env_step_s(m.cpu, step_threads, step_envs, notes),
        actor_threads=threads,
        infer_fixed_s=inference_s(m.gpu, u, forward, notes),
        infer_per_env_s=0.0,
        update_s=upd or 0.0,
        infer_threads=u if on_cpu else 0,
        cores=m.cores,
        loop_overhead=overhead,
        share_cores_actors=cores_a,
        share_cores_learner=cores_l,
    )
    start, per_update = learner_data(conf)
    p = model.predict(
        costs,
        conf.actors,
        conf.workload.frames,
        conf.env.frameskip,
        updates,
        batch=batch,
        learner_start_steps=start,
        learner_threads=u if on_cpu else 0,
        steps_per_update=per_update,
        eval_envs=planned.eval,
        start_s=start_s(m, remote, threads, envs, notes),
        queue=unroll_queue(conf),
        remote=remote,
    )
    learner_time = p.learner_s if updates else 0.0  # the learner's wall time, from the task's start (its metric)
    knobs = {
        "actors": conf.actors,
        "actor_threads": threads,
        "sm_limit": u,
        "inference_batch": batch,
        "precision": conf.precision,
    } | {k: getattr(conf, k) for k in ("actor_procs", "actor_hosts") if getattr(conf, k)}
    joules, how = energy(p, m, u)
    return JobPrediction(
        knobs,
        cpu_gpu_ratio(ratio_threads(threads, remote), u),
        p.fps(conf.env.frameskip),
        p.sps,
        p.runtime_s,
        p.actors_s,
        updates,
        updates / learner_time if learner_time > 0 else None,
        p.bound,
        p.actor_bound,
        joules,
        how,
        notes,
        dict(p.phases),
    )


def ratio_threads(threads: int, remote: model.Remote | None) -> int:
    """The CPU/GPU ratio's numerator: the job's actor threads (local processes: the plan's,
    counted once on the learner's host), or with actor hosts the sum of their stepping threads,
    each host's capped at its hardware threads (as a job counts them: remote/telemetry.py)."""
    if remote is None or not remote.hosts:
        return threads
    return remote.hosts * min(remote.threads, remote.host_cpus)


def remote_of(conf, m: Machine, envs: int, notes: list[str]) -> model.Remote | None:
    """The job's actor processes as the model sees them (model.Remote), or None where its envs
    step in its own process. actor_hosts H: one process on each of H hosts of --actor-host-cpus
    hardware threads (default: as many as the profile's host, an assumption), all of them
    stepping, across --link (default: none, an assumption); actor_procs P: P processes on the
    learner's host, each with the family's whole pool of threads (rlbench/prepare/plan.py)."""
    if not (conf.actor_hosts or conf.actor_procs or conf.actor_server.remote_envs):
        return None
    fam, fit = family(conf.env.kind), rpc_fit(m.cpu)
    costs = {
        "actor_s": fit["actor_cpu_s"],
        "server_s": fit["server_cpu_s"],
        "bytes_up": fit["bytes_up"],
        "bytes_down": fit.get("bytes_down", (0.0, 0.0)),
        "start_s": fit["start_s"],
    }
    if conf.actor_server.remote_envs:
        notes.append(
            f"estimate: actor_server.remote_envs={conf.actor_server.remote_envs} (actors started by hand) "
            "modelled as processes on this host like actor_procs'"
        )
    if not conf.actor_hosts:
        procs = max(1, conf.actor_procs) + (1 if conf.actor_server.remote_envs else 0)
        pool = fam.hardware_threads(conf.actor_threads, m.cores)
        return model.Remote(procs, pool, 0, m.cores, **costs)
    cpus = m.actor_host_cpus or m.cpu.hardware_threads
    if not m.actor_host_cpus:
        notes.append(
            f"assumption: each actor host has {cpus} hardware threads and steps envs as {m.cpu.label()} "
            "(--actor-host-cpus N to say otherwise)"
        )
    if m.link is None:
        notes.append(
            "assumption: no --link given: the network between the actor hosts and the learner's host adds "
            "no time and no bandwidth limit (--link 10gbit,0.1ms to model one)"
        )
    if conf.actor_hosts > envs:
        raise ValueError(
            f"actor_hosts={conf.actor_hosts}: each actor host steps at least one env; the job has {envs} "
            f"(actors + eval envs); allowed: actor_hosts <= {envs}"
        )
    return model.Remote(
        conf.actor_hosts, fam.hardware_threads(None, cpus), conf.actor_hosts, cpus, link=m.link or model.Link(), **costs
    )


def start_s(m: Machine, remote: model.Remote | None, threads: int, envs: int, notes: list[str]) -> float:
    """Seconds before the first step: the envs' first reset, and with actor processes their
    start first (the profile's: Python, the imports, joining; processes on the learner's host
    start together on its cores, so many take longer: x max(1, procs / cores)); an actor host
    resets its own envs on its own threads."""
    if remote is None:
        return reset_s(m.cpu, threads, envs, notes)
    if remote.hosts:
        return remote.start_s + reset_s(m.cpu, remote.threads, max(1, round(envs / remote.procs)), notes)
    return remote.start_s * max(1.0, remote.procs / m.cores) + reset_s(m.cpu, threads, envs, notes)


def energy(p: model.Prediction, m: Machine, units: int) -> tuple[float | None, str]:
    """The task's energy from the profile's power per state; one profile only (a what-if's
    states mix two machines, whose powers were never drawn together)."""
    if m.cpu.run_id != m.gpu.run_id:
        return None, "not predicted: a what-if machine combines two profiles whose power was never measured together"
    joules, how = task_energy(p.phases, m.gpu.power, units)
    return joules, how if joules is not None else f"{how} [{m.gpu.label()}]"
