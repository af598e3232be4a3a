"""The hot path's modes (`hot_path.inference`, `hot_path.learner`): which exist, which a device offers.

Torch-free names and rules; the modes themselves run in rlbench/roles/hot_path.py. docs/hot_path.md.
"""

from __future__ import annotations

EAGER = "eager"  # today's path: the network's Python forward, op by op
COMPILE = "compile"  # torch.compile, its default mode (CPU and GPU)
REDUCE_OVERHEAD = "reduce-overhead"  # torch.compile(mode="reduce-overhead"): CUDA graphs under inductor
CUDA_GRAPHS = "cuda_graphs"  # the inference forward captured in a CUDA graph at the job's batch size

MODES: dict[str, tuple[str, ...]] = {
    "inference": (EAGER, COMPILE, REDUCE_OVERHEAD, CUDA_GRAPHS),
    "learner": (EAGER, COMPILE, REDUCE_OVERHEAD),
}
CUDA_ONLY = frozenset({REDUCE_OVERHEAD, CUDA_GRAPHS})


def offered(role: str, device_type: str) -> tuple[str, ...]:
    """The modes of `role` a device of `device_type` ("cpu", "cuda"; "any": every mode) offers."""
    return tuple(m for m in MODES[role] if device_type in ("cuda", "any") or m not in CUDA_ONLY)


def allowed(role: str, device_type: str) -> str:
    """What a refusal of `hot_path.<role>` says is allowed on a device of `device_type`."""
    here, lacking = offered(role, device_type), [m for m in MODES[role] if m not in offered(role, device_type)]
    text = f"one of {', '.join(here)}"
    if device_type == "any":
        return text + f" ({', '.join(m for m in MODES[role] if m in CUDA_ONLY)} on a CUDA device only)"
    need = f"; {', '.join(lacking)} {'need' if len(lacking) > 1 else 'needs'} a CUDA device" if lacking else ""
    return text + f" on this host's device ({device_type})" + need


# hot_path.memory_format: how the convolutional torso lays out its weights and inputs.
AUTO, CONTIGUOUS, CHANNELS_LAST = "auto", "contiguous", "channels_last"
MEMORY_FORMATS = (AUTO, CONTIGUOUS, CHANNELS_LAST)


def memory_format(setting: str, device_type: str) -> str:
    """The layout `hot_path.memory_format` runs on a device of `device_type`: auto is
    channels_last on a CPU (the learner's update 11-17% faster than contiguous on the 2-core
    VM, docs/results/hot-path.md, "The learner's update on a CPU") and contiguous on CUDA (the two not
    told apart on an H200, inference or the learner's update: docs/results/hot-path.md, "On a
    GPU (H200)")."""
    if setting != AUTO:
        return setting
    return CHANNELS_LAST if device_type == "cpu" else CONTIGUOUS
