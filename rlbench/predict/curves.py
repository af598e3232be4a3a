"""Profiles as the model reads them: a profile run's curves, found in MLflow (`load_profile`),
evaluated at a job's point (`env_step_s`, `inference_s`, `update_s`, `sharing`, `rpc_fit`),
every estimate named in `notes`. How a point between or beyond the measured ones is read:
docs/predict.md, "Reading a profile".
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from rlbench.core.algorithms import preset
from rlbench.core.env_families import FAMILIES, family
from rlbench.predict.measure import fit_inference
from rlbench.predict.rpc import fit_rpc


class ProfileError(ValueError):
    """No usable profile: what was looked for and what exists."""


@dataclass
class Profile:
    run_id: str
    tags: dict
    env: list[dict]
    inference: list[dict]
    update: list[dict] = field(default_factory=list)
    corun: list[dict] = field(default_factory=list)
    power: list[dict] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    rpc: list[dict] = field(default_factory=list)  # the actor protocol's cost (rlbench/predict/rpc.py)

    @property
    def device(self) -> str:
        """ "cuda" or "cpu": where inference and the learner ran."""
        d = self.tags.get("profile_device") or self.tags.get("device", "cpu")
        if d == "auto":
            return "cuda" if self.tags.get("cuda_available") == "True" else "cpu"
        return "cuda" if d.startswith("cuda") else "cpu"

    @property
    def hardware_threads(self) -> int:
        return int(self.tags.get("hardware_threads") or max(r["threads"] for r in self.env))

    def check_fits(self, conf, side: str) -> None:
        """A profile measures one env (the actor side) and one algorithm (inference and the
        learner); ValueError when the job's differ."""
        key, want = ("env_id", conf.env.id) if side == "actors" else ("algo.name", conf.algo.name)
        have = self.tags.get(key) if key == "env_id" else self.params.get(key)
        if have is not None and have != want:
            raise ValueError(
                f"{self.label()} measured {key}={have}; the job has {key}={want}: "
                f"allowed: a profile of {key}={want} "
                f"({profile_command(conf.env.id, conf.env.kind, conf.algo.name)})"
            )

    def label(self) -> str:
        where = self.tags.get("gpu_name") if self.device == "cuda" else self.tags.get("cpu_model", "?")
        return (
            f"profile {self.run_id[:8]} ({self.tags.get('host', '?')}: {where}, "
            f"{self.hardware_threads} threads; {self.tags.get('env_id', '?')})"
        )


def load_profile(run_id: str) -> Profile:
    """The profile run `run_id` from the current tracking store (tracking.store.use_store)."""
    from rlbench.tracking.profiles import (  # lazy: keeps mlflow, torch off the start
        incomplete,
        is_profile,
        read_profile,
    )
    from rlbench.tracking.readers import NoSuchRun  # lazy: keeps mlflow off the start

    try:
        record = read_profile(run_id)
    except NoSuchRun as e:
        raise ProfileError(f"--profile={run_id}: no such run in {e.uri} ({e.detail})") from None
    run, tables = record.run, record.tables
    if not is_profile(run):
        raise ProfileError(
            f"--profile={run_id}: run {run.name!r} is not a profile (tag rlbench.role="
            f"{run.tags.get('rlbench.role')!r}); allowed: a run of python -m rlbench.profile"
        )
    why = incomplete(run)
    if why:
        raise ProfileError(
            f"--profile={run_id}: profile {run.name!r} is incomplete: {why}; allowed: a complete "
            "profile (run python -m rlbench.profile again)"
        )
    if not tables["env"] or not tables["inference"]:
        raise ProfileError(f"--profile={run_id}: the run has no env.json or inference.json table")
    return Profile(
        run_id,
        run.tags,
        tables["env"],
        tables["inference"],
        tables["update"],
        tables["corun"],
        tables["power"],
        run.params,
        tables.get("rpc") or [],
    )


def profile_command(env_id: str, kind: str | None, algo: str | None) -> str:
    """The profile command for a job's env and algorithm, with the config groups that compose
    them (the env family's overrides, e.g. env=pong, env=cartpole; the preset the algorithm
    declares for the family's observations, e.g. r2d2_vector for vectors)."""
    if kind in FAMILIES:
        env, observation = family(kind).overrides(env_id), family(kind).OBSERVATION
    else:  # a record of a family not known here: the id over the default env
        env, observation = f"env.id={env_id}", None
    algo_part = f" algo={preset(algo, observation)}" if algo else ""
    return f"python -m rlbench.profile {env}{algo_part}"


def _interp(x: float, xs: list[float], ys: list[float]) -> float:
    """Piecewise linear through (xs, ys) sorted by x, flat beyond the ends."""
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in itertools.pairwise(zip(xs, ys, strict=True)):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]


def env_step_s(p: Profile, threads: int, envs: int, notes: list[str]) -> float:
    measured = sorted({r["threads"] for r in p.env})
    t = min(threads, envs)
    if t not in measured:
        use = max(x for x in measured if x <= t) if min(measured) <= t else min(measured)
        notes.append(
            f"estimate: env stepping on {t} actor threads taken from {use} threads' per-step cost "
            f"(assumes stepping scales linearly with threads; {p.label()} measured {measured})"
        )
        t = use
    pts = sorted((r["envs"], r["env_step_s"]) for r in p.env if r["threads"] == t)
    return _interp(math.log(envs), [math.log(e) for e, _ in pts], [s for _, s in pts])


def reset_s(p: Profile, threads: int, envs: int, notes: list[str]) -> float:
    """Seconds of the first reset of `envs` envs on `threads` threads: the profile's CPU
    seconds per env reset (log-interpolated over envs) x envs / threads; 0 with a note for a
    profile that did not time resets."""
    measured = sorted({r["threads"] for r in p.env})
    t = min(threads, envs)
    use = t if t in measured else (max(x for x in measured if x <= t) if min(measured) <= t else min(measured))
    pts = sorted(
        (r["envs"], r["reset_s"] * min(r["threads"], r["envs"]) / r["envs"])
        for r in p.env
        if r["threads"] == use and r.get("reset_s") is not None
    )
    if not pts:
        notes.append(f"{p.label()} did not time the envs' first reset: startup counted as 0 s")
        return 0.0
    return _interp(math.log(envs), [math.log(e) for e, _ in pts], [s for _, s in pts]) * envs / t


def _by_units(rows: list[dict], units: int, what: str, p: Profile, notes: list[str], value) -> float:
    """value(u) at `units`, linear between measured unit counts, the nearest beyond them."""
    measured = sorted({r["units"] for r in rows})
    if units in measured:
        return value(units)
    if not measured[0] < units < measured[-1]:
        near = min(measured, key=lambda u: abs(u - units))
        notes.append(f"estimate: {what} at {units} units taken from {near} units ({p.label()} measured {measured})")
        return value(near)
    lo, hi = max(u for u in measured if u < units), min(u for u in measured if u > units)
    notes.append(f"estimate: {what} at {units} units interpolated between {lo} and {hi} units")
    return value(lo) + (value(hi) - value(lo)) * (units - lo) / (hi - lo)


def inference_s(p: Profile, units: int, batch: int, notes: list[str]) -> float:
    def at(u: int) -> float:
        pts = sorted((r["batch"], r["seconds"]) for r in p.inference if r["units"] == u)
        if pts[0][0] <= batch <= pts[-1][0] or len(pts) < 2:
            return _interp(batch, [b for b, _ in pts], [s for _, s in pts])
        fixed, per_env = fit_inference([r for r in p.inference if r["units"] == u])[u]
        return fixed + per_env * batch

    return _by_units(p.inference, units, "central inference", p, notes, at)


def update_s(p: Profile, units: int, notes: list[str], updates: int = 0) -> float | None:
    """Seconds per update at `units`; with `updates` > 0, the mean over a task of that many
    updates whose first one costs the profile's `first_s` (a profile without it: all alike)."""
    if not p.update:
        return None
    steady = _by_units(
        p.update,
        units,
        "the learner update",
        p,
        notes,
        lambda u: next(r["seconds"] for r in p.update if r["units"] == u),
    )
    if updates < 1 or any(r.get("first_s") is None for r in p.update):
        return steady
    first = _by_units(
        p.update,
        units,
        "the first learner update",
        p,
        [],
        lambda u: next(r["first_s"] for r in p.update if r["units"] == u),
    )
    return (first + (updates - 1) * steady) / updates


def sharing(p: Profile, units: int, notes: list[str]) -> tuple[float, float, float] | None:
    """(loop_overhead, effective cores of the actors, of the learner) from the profile's co-run
    at the job's unit count (the nearest measured one otherwise, named), or None without one.

    loop_overhead = the composed time per step (env stepping + inference at the co-run's envs)
    over the actor loop's measured one. The co-run's demand D = loop_sps x the CPU seconds per
    step (env_step_s + units x inference / envs, x loop_overhead) + units (a learner never
    waiting); the actors were slowed by f_a = loop_sps / corun_sps, the learner by
    f_l = corun_update_s / update_s, so processor sharing holds with D / f_a cores seen by the
    actors and D / f_l by the learner: the model shares those at other demands."""
    if not p.corun or not p.update or p.device != "cpu":
        return None
    rows = sorted(p.corun, key=lambda r: (abs(r["units"] - units), r["units"]))
    r = rows[0]
    if not r["corun_sps"] > 0:  # the co-run timed no actor step (a learner update shorter than one)
        notes.append(f"no sharing estimate: the co-run at {r['units']} units timed no actor step (corun_sps 0)")
        return None
    if r["units"] != units:
        notes.append(f"estimate: sharing with the learner at {units} units taken from the co-run at {r['units']} units")
    quiet: list[str] = []
    envs, u = r["envs"], r["units"]
    step = env_step_s(p, r["threads"], envs, quiet)
    composed = envs / (envs * step / min(r["threads"], envs) + inference_s(p, u, envs, quiet))
    overhead = max(1.0, composed / r["loop_sps"])
    demand = r["loop_sps"] * overhead * (step + u * inference_s(p, u, envs, quiet) / envs) + u
    f_a = max(1.0, r["loop_sps"] / r["corun_sps"])
    f_l = max(1.0, r["corun_update_s"] / update_s(p, u, quiet))
    return overhead, demand / f_a, demand / f_l


def rpc_fit(p: Profile) -> dict:
    """The actor protocol's cost per message as fixed + per env (rlbench/predict/rpc.py
    fit_rpc) and the seconds until an actor process joined; ValueError naming what is missing
    where the profile did not measure it (a profile without rpc.json, or --rpc-seconds 0)."""

    fit = fit_rpc(p.rpc) or {}
    missing = [k for k in ("actor_cpu_s", "server_cpu_s", "bytes_up") if k not in fit]
    if missing:
        why = "; ".join(dict.fromkeys(r["reason"] for r in p.rpc if r.get("reason"))) or "no rpc.json table"
        raise ValueError(
            f"{p.label()} did not measure the actor protocol's {', '.join(missing)} ({why}); a job with "
            "actor processes or actor hosts needs it: allowed: a profile that measured it "
            "(python -m rlbench.profile, --rpc-seconds > 0)"
        )
    starts = [r["start_s"] for r in p.rpc if r.get("start_s") is not None]
    return fit | {"start_s": max(starts) if starts else 0.0}
