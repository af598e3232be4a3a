"""A job's plan: everything decided about a job before any role starts, decided once.

`plan_job(conf)` resolves the device, the compute grant (refused here when this host cannot
honour it), the actors' threads and pinning, the envs, the envs per forward, the task and the
env's spec; the trainer, the record and predict (`envs_of`) use it. docs/architecture.md, "plan".
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rlbench.config.schema import Config
from rlbench.core.algorithms import algorithm, config_module
from rlbench.core.env_families import family
from rlbench.core.resources import ComputeLimit, resolve_device, usable_cpus
from rlbench.envs.spec import EnvSpec, env_spec
from rlbench.envs.vector import resolve_inference_batch

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Envs:
    """The envs a job's actors step and how: pure arithmetic on the config (predict uses it too).
    The training envs are the config's `actors` (ids [0, actors)), read there: not copied here."""

    eval: int  # evaluation envs after them; only where the algorithm learns (eval measures a learned policy)
    total: int  # every env the actors step: actors + eval
    actor_threads: int  # CPU hardware threads stepping them (the CPU/GPU ratio's numerator)
    inference_batch: int  # envs per central-inference forward (envs/vector.py resolve_inference_batch)
    # (the trainer hands the vector env the config's inference_batch; it resolves it by the same rule)


def eval_envs_of(conf: Config) -> int:
    """The evaluation envs a job steps: `eval_envs` where the algorithm learns (evaluation
    measures a learned policy), else none."""
    return conf.eval_envs if config_module(conf.algo.name).LEARNS else 0


def out_of_process(conf: Config) -> bool:
    """Whether the job's envs step in actor processes (rlbench/remote/) instead of its own."""
    return conf.actor_procs > 0 or conf.actor_hosts > 0 or conf.actor_server.remote_envs > 0


SLURM_LAUNCHER = "SlurmLauncher"  # hydra-submitit-launcher's class behind hydra/launcher=slurm


@dataclass(frozen=True)
class Placement:
    """Where a job's actor tasks (actor_hosts) run: `executor` "slurm" (an sbatch array beside the
    learner, which hydra/launcher=slurm placed) or "local" (submitit's local executor: processes
    of this host, under every other launcher, so a user on one box can try it), and the job's
    folder on the shared disk (the address file, submitit's files of the tasks; None: a
    temporary folder of this host)."""

    executor: str = "local"
    folder: Path | None = None


def launcher_problem(launcher_target: str) -> str | None:
    """Why Hydra's launcher cannot launch from this host, before any run: hydra/launcher=slurm
    needs SLURM's srun (submitit looks for it), else None."""
    if launcher_target.rpartition(".")[2] != SLURM_LAUNCHER or shutil.which("srun"):
        return None
    return (
        "hydra/launcher=slurm: no srun on this host's PATH (not a SLURM cluster, or SLURM's commands not loaded); "
        "run the command on a SLURM login node, or leave hydra/launcher out to run the jobs on this host "
        "(Hydra's basic launcher; hydra/launcher=joblib for parallel jobs), or add dry_run=true to print the "
        "submission without submitting"
    )


def placement_for(launcher_target: str, output_dir: Path | None) -> Placement:
    """The placement of a job Hydra launched with `launcher_target` (hydra.launcher._target_),
    its files in its output folder."""
    kind = "slurm" if launcher_target.rpartition(".")[2] == SLURM_LAUNCHER else "local"
    return Placement(kind, Path(output_dir) if output_dir is not None else None)


def envs_of(conf: Config, cores: int | None = None) -> Envs:
    """The envs of a job's config; `cores`: the machine's CPUs (predict models another
    machine's), None: the ones this process may use."""
    fam, n_eval = family(conf.env.kind), eval_envs_of(conf)
    threads = fam.hardware_threads(conf.actor_threads, cores or len(usable_cpus()))
    partial = fam.PARTIAL_BATCHES
    if out_of_process(conf):  # actor processes (rlbench/remote/job_actors.py)
        partial = True  # central inference batches whole processes' steps, whatever the family
        if conf.actor_procs:
            threads = local_actor_threads(threads, conf.actor_procs, conf.actor_threads or cores or len(usable_cpus()))
    total = conf.actors + n_eval
    return Envs(n_eval, total, threads, resolve_inference_batch(conf.inference_batch, total, partial))


def local_actor_threads(pool: int, procs: int, cpus: int) -> int:
    """Hardware threads `procs` actor processes on the job's host step envs on, each with its
    family's pool of `pool` threads (rlbench/remote/job_actors.py LocalActors), all on the same `cpus`
    CPUs (an explicit actor_threads, or every usable CPU): Atari's pools share them (the pool
    is all of them), gym's one-thread processes take one each."""
    return min(procs * pool, max(pool, cpus))


@dataclass(frozen=True)
class JobPlan:
    conf: Config  # validated; conf.workload.learner_updates resolved
    device: torch.device
    compute: ComputeLimit  # entered by the job around the roles; its grant is known from the start
    envs: Envs
    pin: int  # first CPU the actors' threads are pinned from; -1: not pinned (actor_threads null)
    learner_updates: int  # the task's updates; 0 without a learner (algo=random, learner=false)
    replay_ratio: float | None  # samples per unroll the task implies; None without a learner
    spec: EnvSpec  # the env's shapes; the built env must agree
    algo: ModuleType  # the algorithm's declarations (rlbench.core.algorithms.AlgorithmPlugin), resolved once
    build: Callable[[Any], Any]  # its build(ctx: AlgoContext) -> AlgoParts (rlbench/roles/contract.py)
    family: ModuleType  # the env family's declarations (rlbench.core.env_families.EnvFamily), resolved once
    placement: Placement = Placement()  # where actor tasks go (actor_hosts > 0)

    def grant_metrics(self, actor_threads: int | None = None) -> dict:
        """sm_granted, sm_total and cpu_gpu_ratio, for the planned threads or those used. With
        actor processes the ratio is known once they joined (their threads, capped per host:
        rlbench/remote/telemetry.py counted_threads), so the plan alone gives none."""
        m = self.compute.grant.metrics(actor_threads or self.envs.actor_threads)
        if actor_threads is None and out_of_process(self.conf):
            m.pop("cpu_gpu_ratio")
        return m

    def tags(self) -> dict[str, str]:
        grant = self.compute.grant
        return {
            "device": str(self.device),
            "env_id": self.conf.env.id,
            "compute_unit": grant.compute_unit,
            "sm_backend_used": grant.backend,  # the param sm_backend is what was asked for
            "inference_batch_used": str(self.envs.inference_batch),
        }  # the param is what was asked


def plan_job(conf: Config, placement: Placement | None = None) -> JobPlan:
    """The plan of a validated config. Raises ResourceError (a limit this host cannot
    honour) or EnvIdError before anything is built. `placement`: where its actor tasks go."""
    algo, fam = config_module(conf.algo.name), family(conf.env.kind)
    device = resolve_device(conf.device)
    compute = ComputeLimit(conf.sm_limit, device, conf.sm_backend)
    pin = usable_cpus()[0] if conf.actor_threads else -1  # an explicit thread count is also pinned
    updates = conf.workload.learner_updates if algo.LEARNS and conf.learner else 0
    return JobPlan(
        conf,
        device,
        compute,
        envs_of(conf),
        pin,
        updates,
        algo.task_replay_ratio(conf),
        env_spec(conf.env),
        algo,
        algorithm(conf.algo.name).build,
        fam,
        placement or Placement(),
    )
