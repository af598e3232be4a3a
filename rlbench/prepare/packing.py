"""A pack (`pack=K`): a configuration run as K jobs at once on this host, identical but for their
seeds, each on its own CPUs. Pure: the CPUs' split, the members' seeds and overrides, and the
refusals of what a pack cannot do. The sweep launches a pack (rlbench/sweeps/pack.py); a member
job confines its process to its share (rlbench/train/job.py). docs/packing.md.
"""

from __future__ import annotations

PACK_SEED_STRIDE = 1000  # member k's seed: seed + k * 1000 (env i of a job is seeded seed + i)


def cpu_shares(cpus: list[int], k: int) -> list[list[int]]:
    """`cpus` split into `k` disjoint shares in order, as even as can be (the first get one more)."""
    if not 1 <= k <= len(cpus):
        raise ValueError(f"{k} shares of {len(cpus)} CPUs")
    size, extra = divmod(len(cpus), k)
    shares, at = [], 0
    for i in range(k):
        n = size + (i < extra)
        shares.append(cpus[at : at + n])
        at += n
    return shares


def cpus_text(cpus: list[int]) -> str:
    return ",".join(str(c) for c in cpus)


def parse_cpus(text: str) -> list[int]:
    return [int(c) for c in text.split(",") if c.strip()]


def member_seed(seed: int, index: int) -> int:
    return seed + index * PACK_SEED_STRIDE


def pack_checks(c) -> list[str]:
    """What a pack cannot do whatever the host: a single run of one (the sweep starts its jobs
    together), or actors in other processes or hosts."""
    if c.pack == 1:
        return []
    problems = []
    if c.actor_procs or c.actor_hosts or c.actor_server.remote_envs:
        problems.append(
            f"pack={c.pack} with actor_procs={c.actor_procs} actor_hosts={c.actor_hosts} "
            f"actor_server.remote_envs={c.actor_server.remote_envs}: not supported (a packed job's envs step in "
            "its own process, on its own CPUs); allowed: pack=1, or all three 0"
        )
    return problems


def pack_host_checks(c, cpus: int, cuda: bool) -> list[str]:
    """What this host cannot give a pack: more jobs than its usable CPUs, the jobs' actor threads
    beyond them, an SM limit that separate processes cannot share (green contexts made in separate
    processes are split independently and overlap), or learner threads beyond a job's share."""
    k = c.pack
    if k == 1 or c.packing.id is not None:  # a pack's job: its sweep checked the pack on the whole host
        return []
    if k > cpus:
        return [f"pack={k}: more jobs than the {cpus} usable CPUs here; allowed: 1..{cpus} (each job its own CPUs)"]
    share = cpus // k
    problems = []
    if c.actor_threads is not None and c.actor_threads * k > cpus:
        problems.append(
            f"actor_threads={c.actor_threads} with pack={k}: {c.actor_threads * k} CPU threads, more than the {cpus} "
            f"usable here; allowed: actor_threads <= {share} (or null: each job's share)"
        )
    if c.sm_limit is not None and cuda and c.sm_backend != "mps":
        problems.append(
            f"sm_limit={c.sm_limit} with pack={k}: green contexts made in separate processes are split independently "
            "and overlap (they partition SMs only within a process); allowed: sm_limit=null (the jobs time-slice "
            "the GPU), or sm_backend=mps where an MPS control daemon already runs"
        )
    if c.sm_limit is not None and not cuda and c.sm_limit > share:
        problems.append(
            f"sm_limit={c.sm_limit} with pack={k}: more learner and inference threads than a job's {share} CPUs; "
            f"allowed: null or 1..{share}"
        )
    return problems


def gpu_sharing(c, cuda: bool) -> str:
    """How a packed job shares the device: the record's `gpu_sharing` tag."""
    if not cuda:
        return "none (no CUDA device)"
    return "mps" if c.sm_limit is not None and c.sm_backend == "mps" else "time-slicing"
