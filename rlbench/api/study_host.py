"""What the study asks of this host before any job (rlbench/api/study.py): whether it has a CUDA
device and how many compute units, its usable CPUs, and which of a stage's values it cannot run,
each refused by the same checks a job's config meets (rlbench/prepare/validate.py, host checks).
"""

from __future__ import annotations

import copy
import dataclasses
import socket

import torch

from rlbench.config.rules import ConfigError
from rlbench.core.errors import Refusal
from rlbench.core.resources import ComputeLimit, ResourceError, granted_sms, resolve_device, usable_cpus
from rlbench.predict.curves import load_profile, profile_command
from rlbench.predict.jobs import Machine, predict_job
from rlbench.predict.sizing import least_frames
from rlbench.prepare.compose import compose_job
from rlbench.prepare.validate import resolve_learner_updates
from rlbench.tracking.profiles import profile_runs
from rlbench.tracking.store import use_store


@dataclasses.dataclass(frozen=True)
class StudyHost:
    cuda: bool
    units: int  # compute units: the GPU's SMs, or the CPU threads for the learner and inference
    threads: int  # usable CPUs
    major: int | None = None  # the GPU's compute capability (its SM grants' granularity)

    def half_units(self) -> int:
        """Half the compute units, as a green context would grant them."""
        half = max(1, self.units // 2)
        return granted_sms(half, self.units, self.major) if self.cuda and self.major is not None else half


def probe(conf) -> StudyHost:
    """This host as the study's jobs will see it (their `device`)."""
    device = resolve_device(conf.device)
    cuda = device.type == "cuda"
    major = torch.cuda.get_device_capability(device)[0] if cuda else None
    return StudyHost(cuda, ComputeLimit(None, device).grant.total, len(usable_cpus()), major)


def on_host(host: StudyHost, key: str, value: str) -> tuple[str, str | None]:
    """The value this host runs for a stage's `key=value`, and the note where it differs: pinned
    actor threads above the usable CPUs become all of them (the CPU analogue of the stage)."""
    if key == "actor_threads" and value != "null" and int(value) > host.threads:
        note = f"{key}={value}: more than the {host.threads} usable CPUs here; {host.threads} instead"
        return str(host.threads), note
    return value, None


def left_out(host: StudyHost, common: list[str], key: str, value: str) -> str | None:
    """Why this host cannot run the stage's job `key=value` (its config composed and checked as
    the sweep will check it), else None."""
    try:
        compose_job([*common, f"{key}={value}"])
    except (ConfigError, Refusal, ResourceError) as e:
        return f"{key}={value}: {str(e).splitlines()[-1].strip()}"
    return None


class Machines:
    """This host's newest profile per env, algorithm and precision in the study's store, as
    rlbench.predict's Machine (None, and `missing` saying which and how to make one, where none)."""

    def __init__(self, tracking_uri: str):
        use_store(tracking_uri)
        self.found: dict[tuple, Machine | None] = {}
        self.missing = ""

    def __call__(self, conf) -> Machine | None:
        key = (conf.env.id, conf.algo.name, conf.precision)
        if key not in self.found:
            runs = profile_runs(socket.gethostname(), conf.env.id, conf.algo.name, precision=conf.precision)
            profile = load_profile(runs[0]) if runs else None
            self.found[key] = Machine(profile, profile) if profile else None
            if profile is None:
                command = profile_command(conf.env.id, conf.env.kind, conf.algo.name)
                self.missing = f"no profile of this host for {', '.join(key)} (make one: {command})"
        return self.found[key]


def estimate_s(common: list[str], jobs: list[str], tracking_uri: str) -> tuple[float | None, str]:
    """The predicted seconds of a stage's jobs (each job's runtime_s times its repeats, by
    rlbench.predict on this host's newest profile in the study's store): an estimate, and what it
    rests on; None and why where no profile of this host exists."""
    machines, total = Machines(tracking_uri), 0.0
    for job in jobs:
        conf = compose_job([*common, *job.split()], host=False)
        if (m := machines(conf)) is None:
            return None, f"no estimate: {machines.missing}"
        total += predict_job(conf, m).runtime_s * conf.repeats
    return total, "an estimate: rlbench.predict on this host's profile, the jobs' tasks only (not their starts)"


def at_frames(conf, frames: int, min_updates: int):
    """The job's config at `frames`, its learner updates what those frames imply under the
    algorithm's rule but at least `min_updates` (the study's task)."""
    c = copy.deepcopy(conf)
    c.workload.frames, c.workload.learner_updates = frames, None
    c = resolve_learner_updates(c)
    c.workload.learner_updates = max(min_updates, c.workload.learner_updates)
    return c


def sized_frames(common: list[str], jobs: list[str], tracking_uri: str, steady_s: float) -> tuple[list[str], str]:
    """The frames and learner updates (overrides) of the fewest frames, at least the preset's,
    whose every job of the stage is predicted to hold `steady_s` seconds of steady windows (the
    seconds its actors and learner both run) while making at least the preset's learner updates,
    on this host's profile: an estimate; no override and why where there is no profile or task."""
    machines, frames, updates = Machines(tracking_uri), [], []
    for job in jobs:
        conf = compose_job([*common, *job.split()], host=False)
        if (m := machines(conf)) is None:
            return [], f"frames not sized to {steady_s:g} s of steady windows: {machines.missing}"
        least = conf.workload.learner_updates or 0

        def holds(f: int, conf=conf, m=m, least=least) -> bool:
            return predict_job(at_frames(conf, f, least), m).phases.get("both", 0.0) >= steady_s

        f = least_frames(holds, floor=conf.workload.frames)
        if f is None:
            return [], f"frames not sized: no task is predicted to hold {steady_s:g} s of steady windows ({job})"
        frames.append(f)
        updates.append(at_frames(conf, f, least).workload.learner_updates)
    return [f"workload.frames={max(frames)}", f"workload.learner_updates={max(updates)}"], (
        f"frames sized to hold {steady_s:g} s of steady windows (an estimate from this host's profile)"
    )
