"""The GPU study's predictions (pipelines/gpu_study.py): each planned job composed once and
predicted at any frames (rlbench.predict.jobs) on the profile of its precision, the profile made
from this host's env stepping and the GPU's datasheet (or, on a CPU, all measured here).
"""

from __future__ import annotations

import copy

from rlbench.predict import measure
from rlbench.predict.curves import Profile
from rlbench.predict.datasheet import Flops, notes, planning_profile
from rlbench.predict.jobs import JobPrediction, Machine, predict_job
from rlbench.predict.stage_plan import FRAMES_MAX, FRAMES_STEP, Point, Sized
from rlbench.predict.study_host import Host, here_threads
from rlbench.prepare.compose import compose_job
from rlbench.prepare.validate import resolve_learner_updates

ENV_POINTS_MAX = 64  # env stepping is measured up to this many envs (flat beyond: rlbench.predict.curves)


class Predictor:
    """`predict(knobs, frames)` for the plan: each job composed once (rlbench.prepare), at any
    frames, through rlbench.predict.jobs on the plan's profile of its precision."""

    def __init__(self, base: list[str], profiles: dict[str, Profile], threads: int | None):
        self.base, self.profiles, self.threads = base, profiles, threads
        self.confs: dict[tuple, object] = {}
        self.firsts: dict[Point, float] = {}
        self.notes: list[str] = []
        self.updates_given = any(o.startswith("workload.learner_updates=") for o in base)

    def conf(self, knobs: dict, frames: int):
        key = tuple(
            sorted(((k, v) for k, v in knobs.items() if v is not None or k != "actor_threads"), key=lambda kv: kv[0])
        )
        if key not in self.confs:
            self.confs[key] = compose_job([*self.base, *job_overrides(knobs)], host=False)
        c = copy.deepcopy(self.confs[key])
        c.workload.frames = frames
        return c if self.updates_given else resolve_learner_updates(c)

    def __call__(self, knobs: dict, frames: int) -> tuple[float, str]:
        p = self.job(knobs, frames)
        return p.runtime_s, p.bound

    def job(self, knobs: dict, frames: int) -> JobPrediction:
        profile = self.profiles.get(knobs["precision"])
        if profile is None:
            profile = self.profiles["fp32"]
            self.note(f"estimate: precision={knobs['precision']} predicted at fp32's costs (measured at fp32 only)")
        p = predict_job(self.conf(knobs, frames), Machine(profile, profile, self.threads))
        for n in p.notes:
            self.note(n)
        return p

    def sized(self, point: Point, frames: int) -> Sized:
        """A stage's job at `frames`: its task, its steady span, its updates, threads and units. The
        steady span: the actors' time less that of the smallest task that holds a first learner
        update (envs made and reset, replay filled, the first update done), an estimate."""
        p = self.job(point_knobs(point), frames)
        first = self.first_update_s(point)
        return Sized(
            p.runtime_s,
            max(0.0, p.actors_s - first),
            p.learner_updates,
            p.bound,
            int(p.knobs["actor_threads"]),
            int(p.knobs["sm_limit"]),
        )

    def first_update_s(self, point: Point) -> float:
        """The actors' time of the smallest task (a multiple of FRAMES_STEP) with one learner update."""
        if point not in self.firsts:
            frames = FRAMES_STEP
            while (p := self.job(point_knobs(point), frames)).learner_updates < 1 and frames < FRAMES_MAX:
                frames *= 2
            self.firsts[point] = p.actors_s
        return self.firsts[point]

    def note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)


def point_knobs(point: Point) -> dict:
    """A stage's configuration as the predictor's knobs (at fp32)."""
    return {
        "actors": point.actors,
        "sm_limit": point.sm_limit,
        "precision": "fp32",
        "actor_threads": point.actor_threads,
    }


def job_overrides(knobs: dict) -> list[str]:
    sm, threads = knobs.get("sm_limit"), knobs.get("actor_threads")
    return [
        f"actors={knobs['actors']}",
        f"sm_limit={'null' if sm is None else sm}",
        f"precision={knobs['precision']}",
        *([f"actor_threads={threads}"] if threads is not None else []),
    ]


def measured_env(conf, threads: int, actors: list[int]) -> list[dict]:
    """This host's env stepping at the sweep's actor counts (up to ENV_POINTS_MAX envs), on all its threads."""
    envs = sorted({a for a in actors if a <= ENV_POINTS_MAX} or {min(actors)})
    return measure.env_curve(conf.env, [(threads, e) for e in envs], seconds=0.5)


def profiles_for(conf, host: Host, compare: str | None, units: list[int], actors: list[int]) -> tuple[dict, list[str]]:
    """precision -> the profile the plan reads, and the estimates it rests on: on a GPU (or a
    modelled one) env stepping measured here and the GPU from its datasheet; on a CPU (the
    rehearsal) env stepping, inference and the update all measured here."""
    here = here_threads()
    rows = measured_env(conf, here, actors)
    tags = host.tags | {"hardware_threads": here}
    if host.gpu is None:  # all units only: the model takes other unit counts from it, and says so
        inference = measure.inference_curve(conf, sorted({1, max(actors)}), [max(units)], repeats=3)
        updates = [measure.update_time(conf, max(units), repeats=1)] if conf.learner else []
        ptags = {
            "profile_device": "cpu",
            "env_id": conf.env.id,
            "hardware_threads": str(here),
            "host": tags.get("host", "?"),
            "cpu_model": tags.get("cpu_model", "?"),
        }
        profile = Profile("measured", ptags, rows, inference, updates, params={"algo.name": conf.algo.name})
        return {"fp32": profile}, ["measured here: env stepping, inference and the update on this CPU, just now"]
    flops = Flops(*measure.counted_flops(conf))
    batches = [2**k for k in range(11)]
    out = {}
    for p in ["fp32"] + ([compare] if compare else []):
        c = copy.deepcopy(conf)
        c.precision = p
        out[p] = planning_profile(rows, tags, host.gpu, c, flops, units, batches)
    how = [f"measured here: env stepping of {', '.join(str(r['envs']) for r in rows)} envs on {here} threads"]
    return out, how + notes(host.gpu, list(out), flops)


def predictor_for(base: list[str], profiles: dict[str, Profile], host: Host) -> Predictor:
    """The plan's predictor: at the host's threads where they are not this host's (a dry run's model)."""
    return Predictor(base, profiles, host.threads if host.threads != here_threads() else None)
