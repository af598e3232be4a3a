"""A sweep's packs (`pack=K`, rlbench/prepare/packing.py): each packed configuration expanded into
its K member jobs, launched together in K processes of Hydra's joblib launcher, and the pack's
node figures from the members' own records: the node's throughput over the windows in which all
K were stepping, its energy per task, each member's slowdown against the configuration run alone.
docs/packing.md.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import uuid

from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher

from rlbench.config.schema import PackingConfig
from rlbench.core.metrics import NODE_ENERGY, NODE_FPS, NODE_RATIO, NODE_SLOWDOWN
from rlbench.core.verdict import NODE_JUDGED, TAGS, pack_verdicts, packing_lines
from rlbench.prepare.packing import cpu_shares, cpus_text, member_seed
from rlbench.tracking.packs import log_on_members, log_pack, members


@dataclasses.dataclass
class Pack:
    """One pack of a sweep: its id, K, its configuration's name and repeat, its members' job indices."""

    id: str
    k: int
    config: str
    repeat: int
    members: list[int]


def _without(job: list[str], key: str) -> list[str]:
    return [o for o in job if o.split("=", 1)[0].lstrip("+") != key]


def expand(jobs, confs, names, configs, repeat, cpus: list[int]):
    """Every job of pack K > 1 replaced by its K members (the same overrides, member k's seed, its
    pack and its share of `cpus`), in place, the lists kept parallel; the packs. A job of pack 1 is
    a pack of itself."""
    out = ([], [], [], [], [])
    packs = []
    for job, conf, name, config, r in zip(jobs, confs, names, configs, repeat, strict=True):
        k, pid = conf.pack, uuid.uuid4().hex[:8]
        shares = cpu_shares(cpus, k) if k > 1 else [None]
        start = len(out[0])
        for index, share in enumerate(shares):
            seed = member_seed(conf.seed, index) if k > 1 else conf.seed
            packing = PackingConfig(pid, index, cpus_text(share)) if k > 1 else conf.packing
            extra = [
                f"seed={seed}",
                f"++packing.id={pid}",
                f"++packing.index={index}",
                f"++packing.cpus='{packing.cpus}'",
            ]
            out[0].append(_without(job, "seed") + extra if k > 1 else job)
            out[1].append(dataclasses.replace(conf, seed=seed, packing=packing) if k > 1 else conf)
            out[2].append(f"{name} #{index}" if k > 1 else name)
            out[3].append(config)
            out[4].append(r)
        packs.append(Pack(pid, k, config, r, list(range(start, len(out[0])))))
    return (*out, packs)


def pack_launcher(sweeper, k: int):
    """Hydra's joblib launcher for one pack: K processes of their own, set up as the sweep's."""
    launcher = JoblibLauncher(n_jobs=k, prefer="processes", pre_dispatch="n_jobs", batch_size=1)
    launcher.setup(
        hydra_context=sweeper.hydra_context, task_function=sweeper.launcher.task_function, config=sweeper.config
    )
    return launcher


def node_fps(series: list[list[tuple[int, float]]], min_windows: int, period_s: float) -> tuple[float | None, str]:
    """The sum of the members' mean `window/fps` over the windows in which all of them were
    stepping (each series: (end of a tick's window in ms, its fps), logged only while the actors
    step); None and why where they stepped together for fewer than `min_windows` windows."""
    if any(not s for s in series):
        return None, "a job of the pack logged no window/fps (its actors never stepped a whole window)"
    start, end = max(s[0][0] for s in series), min(s[-1][0] for s in series)
    inside = [[v for t, v in s if start <= t <= end] for s in series]
    fewest = min(len(v) for v in inside)
    if fewest < min_windows:
        together = max(0.0, (end - start) / 1000 + period_s)
        return None, (
            f"the pack's {len(series)} jobs stepped together for {together:.1f} s ({fewest} windows of "
            f"{period_s:g} s; tracking.steady_min_windows={min_windows} needed): no node throughput"
        )
    return sum(statistics.fmean(v) for v in inside), ""


def energy_j(samples: list[tuple[int, float]], start_ms: int, end_ms: int) -> float | None:
    """Joules of one device's power samples (ms, W: the members' samples of the same device merged)
    over [start, end], each sample's power held until the next (the last to the end)."""
    inside = sorted((t, w) for t, w in samples if start_ms <= t <= end_ms)
    if not inside:
        return None
    edges = [start_ms] + [t for t, _ in inside[1:]] + [end_ms]
    return sum(w * (b - a) / 1000 for (_, w), a, b in zip(inside, edges[:-1], edges[1:], strict=True))


def node_ratio(threads: list, units: list, own_units: bool) -> float | None:
    """The node's CPU/GPU ratio: its jobs' actor threads over the node's compute units, their own
    units summed (MPS shares, CPU threads) or, time-slicing one GPU, its units once; None where a
    job logged neither."""
    if any(t is None for t in threads) or any(u is None for u in units) or not units:
        return None
    total = sum(units) if own_units else max(units)
    return sum(threads) / total if total else None


def node_energy(power: dict[str, list[tuple[int, float]]], span: tuple[int, int], k: int, why: str):
    """The node's energy per task: the measured devices' joules (GPU by NVML, CPU package by RAPL:
    each member samples the whole device) over the pack's window, over its K tasks; None and `why`
    where no device was measured."""
    joules = [e for e in (energy_j(s, *span) for s in power.values()) if e is not None]
    if not joules:
        return None, why or "no power measured by any job of the pack"
    return sum(joules) / k, ""


ALONE = re.compile(r"\bpack=\d+\b")


def alone_name(config: str) -> str:
    """The configuration's name run alone: its `pack=K` as `pack=1`."""
    return ALONE.sub("pack=1", config)


def slowdowns(rows: list[dict], pack: Pack) -> list[float | None]:
    """Each member's runtime_s over the median runtime_s of the same configuration run alone (pack=1)
    in this sweep; None where either is unknown."""
    alone = [
        r["runtime_s"]
        for r in rows
        if r.get("config") == alone_name(pack.config) and r.get("status") == "FINISHED" and r.get("runtime_s")
    ]
    base = statistics.median(alone) if alone else None
    out = []
    for i in pack.members:
        t = rows[i].get("runtime_s") if rows[i].get("status") == "FINISHED" else None
        out.append(t / base if t is not None and base else None)
    return out


def figures(pack: Pack, rows: list[dict], min_windows: int, period_s: float) -> tuple[dict, dict]:
    """(metrics, nulls with their reasons) of one pack from its members' rows and records."""
    if any(rows[i].get("status") != "FINISHED" for i in pack.members):
        failed = [
            f"{rows[i]['name']} {rows[i].get('status')}" for i in pack.members if rows[i].get("status") != "FINISHED"
        ]
        why = f"not every job of the pack finished ({'; '.join(failed)}): no node figure"
        keys = (NODE_FPS, NODE_ENERGY, NODE_SLOWDOWN, NODE_RATIO)
        return dict.fromkeys(keys), dict.fromkeys(keys, why)
    got = members([rows[i]["run_id"] for i in pack.members])
    fps, fps_why = node_fps(got.fps, min_windows, period_s)
    energy, energy_why = node_energy(got.power, got.span, pack.k, got.energy_reason)
    slow = [s for s in slowdowns(rows, pack) if s is not None]
    metrics = {NODE_FPS: fps, NODE_ENERGY: energy, NODE_SLOWDOWN: statistics.median(slow) if slow else None}
    metrics[NODE_RATIO] = node_ratio(got.threads, got.units, got.own_units)
    nulls = {NODE_FPS: fps_why, NODE_ENERGY: energy_why}
    nulls[NODE_SLOWDOWN] = "" if slow else f"no {alone_name(pack.config)} job of this sweep finished to compare with"
    nulls[NODE_RATIO] = "a job of the pack logged no actor_threads_used or sm_granted"
    return metrics, {k: v for k, v in nulls.items() if metrics[k] is None}


def record_packs(tracking, parent: str, packs: list[Pack], rows: list[dict], conf) -> list[dict]:
    """Each pack's run under the parent with its node figures (K = 1 too, where a sweep packs at
    all: the figures K is compared against); the packs' rows, as a verdict judges them."""
    out = []
    for pack in packs:
        metrics, nulls = figures(pack, rows, conf.tracking.steady_min_windows, conf.tracking.log_every_s)
        tags = {"pack_id": pack.id, "pack": str(pack.k), "config": pack.config, "repeat": str(pack.repeat)}
        tags["jobs"] = " ".join(str(rows[i].get("run_id")) for i in pack.members)
        run = log_pack(tracking.uri, tracking.experiment, parent, tags, metrics, nulls)
        if metrics.get(NODE_RATIO) is not None:
            log_on_members([rows[i]["run_id"] for i in pack.members], NODE_RATIO, metrics[NODE_RATIO])
        status = "FINISHED" if metrics.get(NODE_FPS) is not None or metrics.get(NODE_ENERGY) is not None else "FAILED"
        out.append({"config": pack.config, "repeat": pack.repeat, "status": status, "run_id": run, **metrics})
        out[-1]["nulls"] = nulls
    return out


def close_packs(parent, tracking, packs: list[Pack], rows: list[dict], conf) -> tuple[list[dict], list[str]]:
    """At the sweep's end: each pack's run and figures, the packing verdicts' lines, and those on
    the parent as tags (packing_fps, packing_energy: the MLflow UI shows them); (pack rows, lines)."""
    pack_rows = record_packs(tracking, parent.run_id, packs, rows, conf)
    verdicts = pack_verdicts(pack_rows, conf.verdict.noise_floor_min)
    why = {m: next((r["nulls"][m] for r in pack_rows if m in r["nulls"]), "") for m in NODE_JUDGED}
    lines = packing_lines(verdicts, why)
    parent.set_tags({TAGS[m]: line.split(": ", 1)[1][:5000] for m, line in zip(NODE_JUDGED, lines, strict=True)})
    return pack_rows, lines
