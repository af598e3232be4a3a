"""Host fingerprint tags for a run: code version, host, CPU, library versions, accelerator (docs/metrics.md, "Tags")."""

from __future__ import annotations

import os
import socket
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from rlbench.core.resources import (
    cpu_model,  # the host's CPU model: also what an actor process tells its job
    cuda_properties,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({e})"
    if out.returncode != 0:
        return f"unknown (not a git checkout: {out.stderr.strip()[:100]})"
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def host_tags() -> dict[str, str]:
    tags = {
        "git_commit": git_commit(),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "hardware_threads": str(os.cpu_count()),
        "torch_version": torch.__version__,
        "ale_py_version": _version("ale-py"),
        "mlflow_version": _version("mlflow"),
        "cuda_available": str(torch.cuda.is_available()),
    }
    if torch.cuda.is_available():
        props = cuda_properties(0)  # read in a child: CUDA must stay uninitialised for sm_backend=mps
        tags["gpu_name"] = props.name
        tags["gpu_sm_count"] = str(props.multi_processor_count)
    return tags
