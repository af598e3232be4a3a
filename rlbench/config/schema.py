"""Typed schemas behind every config group (registered in Hydra's ConfigStore).

Each YAML file in conf/<group>/ starts from the schema stored here under `schema/<group>/base`,
so a wrong type fails at composition and an unknown key is refused; range checks that types
cannot express live in rlbench.prepare.validate. One schema per env family: docs/envs.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from rlbench.core import env_families as envs
from rlbench.core.algorithms import ALGORITHMS, BUILT_IN, config_module


@dataclass
class EnvConfig:
    """What every env family's schema has (rlbench/envs/<family>/family.py `Schema` extends it
    with the family's own fields); the rest of rlbench reads only these."""

    kind: str = MISSING  # the env family (rlbench/core/env_families.py): "atari", "gym" or one registered
    id: str = MISSING  # what the family steps: an ALE ROM name in snake_case ("pong"), a gymnasium id ("CartPole-v1")
    frameskip: int = 1  # env frames per agent step (fps = sps x frameskip); Atari's schema: 4


@dataclass
class WorkloadConfig:
    name: str = MISSING
    frames: int = MISSING  # env frames every job must generate (agent steps x frameskip)
    # Learner updates every job must finish; null = what the frames imply under the algorithm's
    # rule (its config.py task_learner_updates; R2D2 under SEED's unroll queue: the frames'
    # sequences // the insertion batch int(batch_size / samples_per_insert), less its fill).
    learner_updates: Optional[int] = None
    max_runtime_s: float = 0.0  # safety limit: a job still running after this fails; 0 = none


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlruns/mlflow.db"  # or http(s)://server; presets read MLFLOW_TRACKING_URI first
    # new experiments' artifacts: null = a folder named after the experiment next to a SQLite
    # store's database (mlruns/<experiment>/), relative paths likewise; both move with the store.
    # An absolute path or URI is used as given; with a server, only a URI is (else it proxies).
    artifact_location: Optional[str] = None
    experiment: str = "rlbench"  # the presets in conf/tracking/ make it one experiment per env
    run_name: Optional[str] = None  # null = made from the overrides
    log_every_s: float = 1.0  # period of step metrics, >= 1: their step is whole seconds since the task started
    steady_min_windows: int = 3  # fewest steady windows (ticks after the warm-up, before a role is done) for steady/*
    system_metrics: bool = True  # MLflow's own system-metrics sampler (UI's system tab)
    parent_run_id: Optional[str] = None  # set by the sweep for its jobs; null = a top-level run
    tags: Dict[str, str] = field(default_factory=dict)  # extra run tags (a search's study and trial)
    stale_after_s: float = 300.0  # a RUNNING run without heartbeat this long is marked FAILED
    ui_port: int = 5000  # where `mlflow ui` serves a local store: the address and start command printed at the end


@dataclass
class TelemetryConfig:
    enabled: bool = True  # false: no sampler, no energy or op metrics (overhead benchmark)
    rate_hz: float = 10.0  # full-rate sampling of NVML, RAPL and psutil
    cpu_tdp_w: Optional[float] = None  # enables a labelled CPU energy estimate where RAPL is unreadable
    plot: bool = True  # telemetry.png artifact
    # trace.json (Perfetto timeline) keeps each role's spans of the first and of the last
    # trace_window_s seconds of the job; 0 = no trace (docs/timeline.md)
    trace_window_s: float = 10.0


@dataclass
class SearchConfig:
    study: str = "ratio"  # Optuna study name; rerunning the command resumes it
    storage: str = "sqlite:///mlruns/optuna.db"  # or postgresql://user:pw@host/db for many workers
    n_trials: int = 12  # COMPLETE trials in total, across resumes
    # metric names; empty: the task's time (runtime_s, minimised), then energy_per_task_j (minimised)
    # where a job on this host measures or estimates energy (search/space.py default_objectives)
    objectives: List[str] = field(default_factory=list)
    directions: List[str] = field(default_factory=list)  # one per objective; empty with empty objectives
    actors: List[int] = field(default_factory=lambda: [4, 256])  # [low, high], sampled log-uniformly
    actor_threads: List[int] = field(default_factory=lambda: [1, 2])  # [low, high]
    sm_limit: List[int] = field(default_factory=lambda: [1, 2])  # [low, high]: SMs, or CPU threads without CUDA
    seed: int = 0  # sampler seed
    retries: int = 1  # reruns of a trial whose worker died (found by heartbeat)
    heartbeat_s: int = 30
    max_failures: int = 10  # stop after this many failed trials in one run
    workers: int = 1  # workers you start on this study; SQLite allows only 1, more need PostgreSQL
    pruning: bool = False  # stop clearly dominated trials early on their intermediate fps (one objective only)
    pruner_startup_trials: int = 3  # trials that always run to the end before pruning starts
    warm_start_profile: Optional[str] = None  # a profile run id (python -m rlbench.profile): enqueue the predicted best
    warm_start_trials: int = 3  # how many predicted-best configurations run first (a new study only)
    # runs of each trial's configuration, each with its own seed as a sweep's repeats (seed +
    # k * 10_000): the trial's value is their median, and their spread the search's noise floor
    repeats: int = 1


@dataclass
class VerdictConfig:
    """How a sweep judges its configurations (rlbench/core/verdict.py; docs/metrics.md, "The
    verdict"). The sweep's, not a job's: one value per sweep, left out of params and config_hash."""

    metric: str = "runtime_s"  # the compared metric: runtime_s (minimised), task_fps or fps (maximised)
    # the noise floor's minimum, a fraction in [0, 1): no two configurations are told apart by a
    # relative difference at or below it, however close their repeats (0 = the repeats' own floor)
    noise_floor_min: float = 0.0


@dataclass
class SweepOptions:
    """What a sweep does in its own process before its first job (rlbench/sweeps/warm.py), so that
    every measured job runs on a known, warm host: the study's presets set both (conf/experiment/
    study_*.yaml; docs/gpu.md). The sweep's, not a job's: one value per sweep, left out of params
    and config_hash; taken again when resume=true continues the sweep."""

    # the GPU's idle power before the first job: NVML's board power of GPU 0 sampled this many
    # seconds, logged as the parent's child run "idle power" (rlbench.role=idle_power; null with
    # NVML's reason where there is none); 0 = not measured
    idle_power_s: float = 0.0
    # one discarded warm-up job first, the first job's configuration (run name warmup, tag
    # role=warmup; never a job of the sweep, its summary, verdict or report); the basic launcher
    # only: a launcher's own processes would each need their own
    warmup: bool = False


@dataclass
class PackingConfig:
    """A packed job's place in its pack, set by the sweep for each of a pack's jobs (never by
    hand): the pack's id, the job's index and the CPUs its process is confined to. Left out of
    params and config_hash (the record's tags pack_id, pack_index, pack_cpus say it)."""

    id: Optional[str] = None  # null: not a member of a pack
    index: int = 0
    cpus: Optional[str] = None  # comma-separated CPU numbers


@dataclass
class ActorServerConfig:
    """Where central inference waits for actor processes (actor_procs > 0 or remote_envs > 0;
    rlbench/remote/, SEED RL's actor protocol over gRPC)."""

    # null: a unix socket of the job's own (its local actor processes only); HOST:PORT (port 0:
    # any free one) to let actors on other hosts join: a non-loopback address needs the token
    # in the environment variable RLBENCH_ACTOR_TOKEN (never a config value, never logged).
    bind: Optional[str] = None
    # envs the job expects from actor processes started by hand (`python -m rlbench.actor
    # --server HOST:PORT --envs N`), beside those of its actor_procs; the job steps once all joined.
    remote_envs: int = 0
    join_timeout_s: float = 120.0  # seconds to wait for every env to join before the job fails
    idle_timeout_s: float = 60.0  # the job fails once no actor process has been connected this long


@dataclass
class ActorLaunchConfig:
    """Resources of each actor task (actor_hosts > 0; rlbench/remote/tasks.py): a CPU node each,
    asked of SLURM under hydra/launcher=slurm (the learner's task keeps hydra.launcher's), a
    local process otherwise. The env threads are every CPU the task gets."""

    partition: Optional[str] = None  # SLURM partition of the CPU nodes; null: the cluster's default
    cpus_per_task: int = 16  # CPUs per actor task (its env threads: Atari steps on all of them)
    mem_gb: int = 16
    timeout_min: int = 120  # SLURM's limit on an actor task; the learner cancels its tasks when it ends
    account: Optional[str] = None  # SLURM account, where the cluster asks for one


@dataclass
class HotPathConfig:
    """How central inference's forward and the learner's loss run (rlbench/core/hot_path.py;
    docs/hot_path.md). eager (today's path) is the default on every device: on the 2-core CPU
    compile did not win inference beyond the noise, and the learner's compile (6 min cold, 28 s
    cached) cost about what it saved in a job (docs/results/hot-path.md); not
    measured on a GPU. The torso's layout: auto (docs/results/hot-path.md)."""

    inference: str = "eager"  # eager, compile; on CUDA also reduce-overhead, cuda_graphs
    learner: str = "eager"  # eager, compile; on CUDA also reduce-overhead
    # The convolutional torso's layout (weights and inputs): auto (channels_last on a CPU, where
    # the learner's update ran 11-17% faster; contiguous on CUDA, where the two were not told
    # apart on an H200), contiguous or channels_last. The math is the same; the sums' rounding
    # differs between the layouts.
    memory_format: str = "auto"


@dataclass
class Config:
    # The env family's own schema (an EnvConfig; rlbench/envs/<kind>/family.py Schema), chosen by env.kind.
    env: Any = MISSING
    # The algorithm's own schema (rlbench/algo/<name>/config.py Schema), chosen by algo=<name>.
    algo: Any = MISSING
    workload: WorkloadConfig = MISSING
    tracking: TrackingConfig = MISSING
    telemetry: TelemetryConfig = MISSING
    search: Optional[SearchConfig] = None  # search=ratio: an Optuna study instead of a grid
    actors: int = 40  # environment instances (SEED actors)
    actor_threads: Optional[int] = None  # CPU hardware threads stepping envs; null = all
    # Actor processes on this host stepping the envs, each over one gRPC stream to the job's
    # central inference (SEED RL's actors); 0 = the envs step inside the job's process. The
    # envs (actors + eval envs, less actor_server.remote_envs) are split as evenly as can be,
    # actor_threads likewise (at least one each).
    actor_procs: int = 0
    # Actor tasks on other nodes (CPU nodes) per job, placed by the job's launcher through
    # submitit (hydra/launcher=slurm: a SLURM array beside the learner's task; local_submitit:
    # local processes); each is one actor process stepping an equal share of the envs on all of
    # its node's CPUs over one gRPC stream to the job's central inference. 0 = none.
    actor_hosts: int = 0
    actor_launch: ActorLaunchConfig = field(default_factory=ActorLaunchConfig)
    actor_server: ActorServerConfig = field(default_factory=ActorServerConfig)
    sm_limit: Optional[int] = None  # compute units for learner + inference; null = all
    sm_backend: str = "green_context"  # on CUDA: "green_context" or "mps" (needs the MPS daemon)
    # Envs per central-inference forward (envs = actors + eval envs; rlbench/envs/vector.py
    # resolve_inference_batch): -1 = SEED RL's auto, (actors + eval envs) // 2, at least 1, so
    # stepping half the envs overlaps inference of the other half; 0 = lock-step (wait for all
    # envs); k < envs = forward the first k ready. Env families without partial batches (gym)
    # always step in lock-step. A decision: -1 is SEED's flag default, not its published Atari
    # run's 32 of 640 envs (gcp/train_atari.sh): a fixed 32 is lock-step below 32 envs and another
    # share of them at each actor count of a sweep, and its share (1/20) makes ~10x auto's
    # forwards, each paying a fixed cost: smaller forwards measured slower even at auto's half
    # (docs/r2d2.md, "Decisions where rlbench differs"; docs/results/hot-path.md).
    inference_batch: int = -1
    device: str = "auto"  # "auto" (cuda when available), "cpu" or "cuda[:i]"
    # Math of the learner's update and central inference (rlbench/core/precision.py): fp32 (the
    # published runs'), tf32 (CUDA), bf16 or fp16 through torch's autocast; refused where the
    # device has no fast math for it. Losses, targets, priorities stay fp32.
    precision: str = "fp32"
    hot_path: HotPathConfig = field(default_factory=HotPathConfig)  # compile or CUDA graphs per role
    seed: int = 1
    learner: bool = True  # false = actors and inference only (benchmarks)
    # Greedy evaluation (SEED RL's eval envs): environments beside the actors acting with
    # eval_epsilon through the same central inference, never trained on, not counted in
    # `actors`, fps or the task's frames (their frames are `eval_frames`). 0 = none.
    eval_envs: int = 2
    eval_epsilon: float = 0.001  # SEED RL's eval_epsilon
    progress: str = "auto"  # "bar", "log" or "auto" (bar on a terminal)
    resume: bool = False  # sweeps: skip jobs whose identical config already has a FINISHED run
    # Sweeps (-m): run every configuration of the grid this many times, each with its own seed
    # (seed + k * 10_000 for repeat k, or a list `seed=a,b,c` of exactly `repeats` values); the
    # summary and the report compare medians and show the spread (rlbench/core/repeats.py). Not a
    # job's own knob: left out of its params and config_hash, and one value per sweep.
    repeats: int = 1
    # Sweeps (-m) with hydra/launcher=slurm: print the sbatch scripts submitit would submit (the
    # learners' array and, with actor_hosts > 0, each job's actor array) and submit nothing.
    # Not a job's own knob: left out of its params and config_hash.
    dry_run: bool = False
    verdict: VerdictConfig = field(default_factory=VerdictConfig)  # sweeps: what the verdict compares
    sweep: SweepOptions = field(default_factory=SweepOptions)  # sweeps: idle power and a warm-up first
    # Sweeps (-m): run the configuration as this many jobs at once on this host, identical but
    # for their seeds, each on its own share of the usable CPUs (its actor threads by default),
    # sharing the GPU by time-slicing (or MPS with sm_limit); the sweep logs the pack's node
    # throughput and energy per task (rlbench/sweeps/pack.py; docs/packing.md). 1: one job alone.
    pack: int = 1
    packing: PackingConfig = field(default_factory=PackingConfig)  # set by the sweep for a pack's jobs


GROUP_SCHEMAS = {
    "workload": WorkloadConfig,
    "tracking": TrackingConfig,
    "telemetry": TelemetryConfig,
    "search": SearchConfig,
}


_stored: list[tuple] = []  # the schemas register_configs stored last: (algorithm, Schema)... (family, Schema)...


def _schemas() -> tuple:
    return (
        tuple((name, config_module(name).Schema) for name in ALGORITHMS),
        tuple((name, envs.family(name).Schema) for name in envs.FAMILIES),
    )


def _still_stored(cs: ConfigStore, schemas: tuple) -> bool:
    """The ConfigStore holds what register_configs stored last, for these same schemas (Hydra's
    singletons may have been reset since, e.g. by a test putting their state back)."""
    repo = cs.repo.get("schema", {})
    return (
        _stored == [schemas]
        and "schema.yaml" in cs.repo
        and all(f"{name}.yaml" in repo.get("algo", {}) for name, _ in schemas[0])
        and all(f"{name}.yaml" in repo.get("env", {}) for name, _ in schemas[1])
    )


def register_configs() -> None:
    """Store the schemas: config.yaml extends `schema`; conf/<group>/*.yaml extend
    `schema/<group>: base` (kept out of the group itself, so it is no selectable option),
    conf/algo/*.yaml `schema/algo: <algorithm>`, conf/env/*.yaml `schema/env: <family>`.
    Once per process for the same registered schemas (storing them all takes ~60 ms)."""
    cs, schemas = ConfigStore.instance(), _schemas()
    if _still_stored(cs, schemas):
        return
    cs.store(name="schema", node=Config)
    for group, node in GROUP_SCHEMAS.items():
        cs.store(group=f"schema/{group}", name="base", node=node)
    for name in ALGORITHMS:  # conf/algo/*.yaml extend `schema/algo: <algorithm name>`
        cs.store(group="schema/algo", name=name, node=config_module(name).Schema)
        if name not in BUILT_IN:  # one added from outside rlbench: `algo=<name>` picks its Schema's defaults
            cs.store(group="algo", name=name, node=config_module(name).Schema)
    for name in envs.FAMILIES:  # likewise for env families: `env=<name>` where it comes from outside rlbench
        cs.store(group="schema/env", name=name, node=envs.family(name).Schema)
        if name not in envs.BUILT_IN:
            cs.store(group="env", name=name, node=envs.family(name).Schema)
    _stored[:] = [schemas]
