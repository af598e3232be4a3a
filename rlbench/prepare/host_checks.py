"""What this host cannot honour, checked before any work starts: a CUDA device it lacks, more
SMs or CPU threads than it has, a precision without fast math on its device, envs beyond its
free memory. `validate` (rlbench/prepare/validate.py) runs them last; docs/jobs.md, "Refused early".
"""

from __future__ import annotations

import psutil

from rlbench.config.schema import Config
from rlbench.core import precision as precisions  # precisions.cpu_flags: the CPU fake (tests/bf16_cpu.py) replaces it
from rlbench.core.env_families import family
from rlbench.core.precision import precision_problem
from rlbench.core.resources import ComputeLimit, ResourceError, resolve_device, usable_cpus
from rlbench.envs.spec import env_spec
from rlbench.prepare.packing import pack_host_checks
from rlbench.prepare.plan import eval_envs_of


def host_checks(c: Config) -> list[str]:
    """What this host cannot honour: a CUDA device it lacks, sm_limit above its SMs or CPU
    threads, MPS without CUDA or its daemon, envs beyond its memory."""
    import torch  # lazy: keeps torch off the start

    if c.device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(c.device.split(":")[1]) if ":" in c.device else 0
        if index >= count:
            have = f"{count} CUDA device(s)" if count else "no CUDA device (torch.cuda.is_available() is False)"
            return [
                f"device={c.device}: this host has {have}; allowed: auto or cpu"
                + (f", or cuda:0..cuda:{count - 1}" if count else "")
            ]
    device = resolve_device(c.device)
    packed = pack_host_checks(c, len(usable_cpus()), device.type == "cuda")
    if packed:
        return packed
    try:
        limit = ComputeLimit(c.sm_limit, device, c.sm_backend)
    except ResourceError as e:
        return [str(e)]
    return _precision_checks(c, limit) + _memory_checks(c)


def _precision_checks(c: Config, limit) -> list[str]:
    """A precision the job's device has no fast math for (rlbench/core/precision.py), named with the
    device and what it allows. A GPU's compute capability is read in a child process (as the
    compute grant reads its SMs: CUDA stays uninitialised here)."""
    if c.precision == "fp32":
        return []
    device = limit.device
    if device.type == "cuda":
        props = limit.properties(device.index if device.index is not None else 0)
        problem = precision_problem(c.precision, "cuda", props.name, cuda_major=props.major)
    else:
        problem = precision_problem(c.precision, "cpu", _cpu_name(), flags=precisions.cpu_flags())
    return [problem] if problem else []


def _cpu_name() -> str:
    from rlbench.tracking.fingerprint import cpu_model  # lazy: keeps torch off the start

    return f"this CPU ({cpu_model()})"


OBS_COPIES = 4  # observations held per env: the vector env's stack, its batch out, inference's input, the unroll's


def _memory_checks(c: Config) -> list[str]:
    """The envs must fit in the memory this host has available now: each env holds its family's
    own state (ENV_BYTES, measured per family; Atari's emulator) and about OBS_COPIES observations.
    (The replay's memory is the algorithm's own check, e.g. R2D2's.)"""
    spec, n = env_spec(c.env), c.actors + eval_envs_of(c)
    own, obs = getattr(family(c.env.kind), "ENV_BYTES", 0), spec.bytes_per_frame * spec.stack
    per_env = own + OBS_COPIES * obs
    free = psutil.virtual_memory().available
    if n * per_env <= free:
        return []
    shape = "x".join(map(str, spec.obs_shape))
    return [
        (
            f"actors={c.actors} eval_envs={eval_envs_of(c)}: {n} envs need about {n * per_env / 1e9:.1f} GB "
            f"({per_env / 1e6:.2f} MB each: {own / 1e6:.2f} MB of env state + {OBS_COPIES} observations of "
            f"{shape} x {spec.obs_dtype.itemsize} B; env.{'img_size' if hasattr(c.env, 'img_size') else 'id'}="
            f"{getattr(c.env, 'img_size', c.env.id)}) but this host has {free / 1e9:.1f} GB available; allowed: "
            f"at most {max(0, free // per_env)} envs (actors + eval_envs) of this observation size"
        )
    ]
