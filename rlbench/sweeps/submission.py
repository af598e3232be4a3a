"""A sweep's SLURM submission printed, nothing submitted (`python -m rlbench -m
hydra/launcher=slurm ... dry_run=true`): the learners' array and, per job with actor_hosts > 0,
the actor array its learner submits, as submitit's own SlurmExecutor text (what sbatch would
get; no token in it). docs/scale-out.md, "Dry run".
"""

from __future__ import annotations

from pathlib import Path

from rlbench.core.address import TOKEN_ENV
from rlbench.prepare.plan import SLURM_LAUNCHER, eval_envs_of
from rlbench.remote.handoff import ADDRESS_FILE
from rlbench.remote.job_actors import env_shares
from rlbench.remote.tasks import launch_params, sbatch_text

NOT_SLURM = ("_target_", "submitit_folder", "max_num_timeout")  # the launcher's keys that are no sbatch setting


def refusal(launcher: dict) -> str | None:
    """Why this sweep's launcher cannot be dry-run (only SLURM's submission has a text)."""
    target = str(launcher.get("_target_", ""))
    if target.rpartition(".")[2] == SLURM_LAUNCHER:
        return None
    return (
        f"dry_run=true: allowed with hydra/launcher=slurm only (it prints the sbatch scripts submitit would "
        f"submit); this sweep's launcher is {target or 'unknown'}"
    )


def dry_run_text(launcher: dict, sweep_dir: str, jobs: list[list[str]], confs: list) -> str:
    """The learners' array script, then each job's actor array script with a header saying what
    its tasks get (their envs) and where they read the learner's address."""
    params = {k: v for k, v in launcher.items() if k not in NOT_SLURM}
    folder = Path(str(launcher["submitit_folder"]))
    head = (
        f"# ===== learners: one array of {len(jobs)} job{'s' if len(jobs) != 1 else ''} "
        f"(hydra.launcher), files in {folder} ====="
    )
    parts = [head, sbatch_text(params, folder, len(jobs))]
    for i, (job, conf) in enumerate(zip(jobs, confs, strict=True)):
        if conf.actor_hosts:
            parts += [
                actor_header(i, job, conf, Path(sweep_dir) / str(i)),
                sbatch_text(
                    launch_params(conf.actor_launch, "slurm"),
                    Path(sweep_dir) / str(i) / "actor-tasks",
                    conf.actor_hosts,
                ),
            ]
    return "\n".join(parts)


def actor_header(index: int, job: list[str], conf, job_dir: Path) -> str:
    """What job `index`'s actor array is: its tasks and envs, the address hand-off, the token."""
    total = conf.actors + eval_envs_of(conf)
    sizes = env_shares(conf, total)[1]
    plural = "s" if conf.actor_hosts != 1 else ""
    lines = [
        (
            f"# ===== job {index} [{' '.join(job) or '(defaults)'}]: its actor array, {conf.actor_hosts} task{plural}, "
            f"submitted by its learner once it listens ====="
        ),
        (
            f"# envs per task: {' '.join(map(str, sizes))} (of {total}: actors + eval envs; "
            f"{conf.actor_procs} local actor processes beside the learner)"
        ),
        (
            f"# address hand-off: the learner listens on every interface (port 0: a free one) and writes HOST:PORT to "
            f"{job_dir / ADDRESS_FILE}; each task reads it (waiting up to actor_server.join_timeout_s="
            f"{conf.actor_server.join_timeout_s:g} s), then joins over gRPC"
        ),
        (
            f"# token: {TOKEN_ENV} in the learner's environment (made there when unset), exported to the tasks by "
            f"sbatch; never in this script, the pickled arguments, a log or MLflow"
        ),
    ]
    return "\n".join(lines)
