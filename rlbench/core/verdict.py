"""The verdict, written once: the rule (the best configuration by the median of one metric and
those not told apart from it, against the noise floor), the knee, the recommended ratio, the
paper's rule, and Result, the one object holding them that every output only renders. Pure
functions over numbers. docs/metrics.md, "The verdict" and "The report, inside".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rlbench.core.metrics import NODE_ENERGY, NODE_FPS
from rlbench.core.repeats import Spread, config_key, group_by, spread

DEFAULT_METRIC = "runtime_s"
# The metrics a verdict may compare: final values whose better way is known. steady/fps is
# absent from a job with too few steady windows (rlbench/core/steady.py): left out, as a failed job.
COMPARED = {"runtime_s": "lower", "task_fps": "higher", "fps": "higher", "steady/fps": "higher"}
COMPARED |= {"node/fps": "higher", "node/energy_per_task_j": "lower"}  # a sweep's packs (rlbench/sweeps/pack.py)
# A rate over a job's steady windows (core/steady.py): the windows' lowest and highest value
WINDOWED = {"steady/fps": ("steady/fps_min", "steady/fps_max")}
RECORDED = (*COMPARED, *(k for keys in WINDOWED.values() for k in keys))  # what a judged record keeps
REPEATS, WINDOWS = "repeats", "steady windows"  # where a noise floor came from
UNKNOWN = "noise floor unknown"  # the runs' tags say no more
UNKNOWN_FLOOR = f"{UNKNOWN}: one run per configuration; rerun with repeats=3 to tell"
UNKNOWN_WINDOWS = (
    f"{UNKNOWN}: one run per configuration and a job's steady windows give no range (one at 0 "
    "frames/s, or none logged); rerun with repeats=3 to tell"
)
NO_GPU_RATIO = (  # the paper's rule without a GPU: the report's words, and the search's
    "CPU/GPU ratio: not compared: the study's ratio is CPU threads per GPU SM, and these jobs ran "
    "without a CUDA GPU (sm_limit granted CPU threads); sweep on a GPU host to compare ratios"
)
METRIC_TAG, FLOOR_MIN_TAG = "verdict_metric", "verdict_noise_floor_min"  # on a sweep's parent: how it judged


@dataclass(frozen=True)
class Comparison:
    name: str  # the configuration compared with the best
    difference: float  # relative: the larger median over the smaller, less 1
    told_apart: bool | None  # None: the noise floor is unknown
    text: str  # compare()'s words, the difference in how_much's


@dataclass(frozen=True)
class Verdict:
    metric: str
    best: str | None  # None: no configuration has a value of the metric
    tied: tuple[str, ...]  # not told apart from the best (the best left out)
    floor: float | None  # the noise floor (relative); None: unknown
    measured_floor: float | None  # from the repeats alone
    floor_min: float  # the set minimum (verdict.noise_floor_min)
    medians: dict[str, Spread] = field(default_factory=dict)
    comparisons: tuple[Comparison, ...] = ()
    source: str | None = None  # REPEATS, WINDOWS (one run per configuration, a steady rate), None: unknown
    windows_floor: float | None = None  # from the steady windows' range alone

    @property
    def floor_words(self) -> str:
        """`noise floor 7.9%` (the repeats'), `noise floor 35.0% from the steady windows`, or `noise floor unknown`."""
        return floor_words(self.floor, self.source)

    @property
    def best_set(self) -> tuple[str, ...]:
        return ((self.best,) if self.best is not None else ()) + self.tied

    def floor_text(self) -> str:
        if self.floor is not None:
            return self.floor_words
        return UNKNOWN_WINDOWS if self.metric in WINDOWED else UNKNOWN_FLOOR

    def answer(self, repeats: str = "repeats") -> str:
        """answer(); repeats: the key its advice names (a search's: search.repeats)."""
        return answer(self).replace("with repeats=", f"with {repeats}=")

    def label(self, name: str) -> str | None:
        return label(self, name)

    def as_dict(self) -> dict:
        return {
            "metric": self.metric,
            "best": self.best,
            "best_set": list(self.best_set),
            "tied": list(self.tied),
            "noise_floor": self.floor,
            "measured_floor": self.measured_floor,
            "windows_floor": self.windows_floor,
            "floor_source": self.source,
            "noise_floor_min": self.floor_min,
            "floor_text": self.floor_text(),
            "answer": self.answer(),
            "medians": {n: s.as_dict() for n, s in self.medians.items()},
            "comparisons": [c.__dict__ for c in self.comparisons],
        }


def difference(a: float, b: float) -> float:
    """The relative difference of two positive medians: the larger over the smaller, less 1
    (41% faster: one took 1.41 times the other's time, or ran at 1.41 times its rate)."""
    return max(a, b) / min(a, b) - 1


def how_much(difference: float) -> str:
    """A relative difference of two medians in words, before `faster` or `slower`: a percent with
    one decimal below 2x (0.41: `41.0%`), the ratio with two decimals from 2x (1.559: `2.56x`; the
    larger median at least twice the smaller, where a percent would read `155.9%`)."""
    return f"{1 + difference:.2f}x" if difference >= 1.0 else f"{difference:.1%}"


def noise_floor(spreads: Iterable[Spread]) -> float | None:
    """The largest ratio between two runs of one configuration, less 1, over the
    configurations with two runs or more; None when none has, or when one has a run at 0 or
    below (its ratio is unbounded: the floor is unknown, never a guess)."""
    repeated = [s for s in spreads if s.n > 1]
    if not repeated or any(s.low <= 0 for s in repeated):
        return None
    return max(s.high / s.low - 1 for s in repeated)


def windows_floor(ranges: Iterable[tuple[float | None, float | None]]) -> float | None:
    """The largest ratio between one job's fastest and slowest block of steady windows
    (steady/fps_max over steady/fps_min), less 1, over the judged jobs' (lowest, highest); None
    when none has, or one has no positive range (a block at 0 frames/s bounds no ratio)."""
    ratios = []
    for lo, hi in ranges:
        if lo is None or hi is None or not 0 < lo <= hi:
            return None
        ratios.append(hi / lo - 1)
    return max(ratios) if ratios else None


def floor_words(floor: float | None, source: str | None) -> str:
    if floor is None:
        return UNKNOWN
    return f"noise floor {floor:.1%}" + (f" from the {source}" if source == WINDOWS else "")


def judge(
    values: Mapping[str, Iterable[float | None]],
    metric: str = DEFAULT_METRIC,
    floor_min: float = 0.0,
    ranges: Mapping[str, Iterable[tuple]] | None = None,
) -> Verdict:
    """values: configuration -> its finished runs' `metric` (None: not logged). Values that are
    not finite and > 0 are left out (a relative difference needs both positive). ranges: per
    configuration, its runs' steady windows' (lowest, highest), in the order of `values` (a
    metric of WINDOWED): the floor where no configuration has two runs."""
    sense = COMPARED.get(metric)
    if sense is None:
        raise ValueError(f"verdict metric {metric!r}: allowed: {', '.join(COMPARED)}")
    runs = {n: list(vs) for n, vs in values.items()}
    medians = {n: s for n, vs in runs.items() if (s := spread(v for v in vs if v is not None and v > 0))}
    if not medians:
        return Verdict(metric, None, (), None, None, floor_min, {})
    pick = min if sense == "lower" else max
    best = pick(medians, key=lambda n: medians[n].median)
    measured, windows = noise_floor(medians.values()), None
    if ranges is not None and metric in WINDOWED:
        judged = (r for n in medians for v, r in zip(runs[n], ranges[n], strict=True) if v is not None and v > 0)
        windows = windows_floor(judged)
    raw, source = (measured, REPEATS) if measured is not None else (windows, WINDOWS)
    floor, source = (max(raw, floor_min), source) if raw is not None else (None, None)
    comps = tuple(compare(best, n, medians, floor, sense, source) for n in medians if n != best)
    tied = tuple(c.name for c in comps if c.told_apart is False)
    return Verdict(metric, best, tied, floor, measured, floor_min, medians, comps, source, windows)


def judge_runs(by_config: Mapping[str, Iterable], metric: str, floor_min: float, get) -> Verdict:
    """judge over records (a sweep's rows, the store's runs, a trial's runs) by configuration;
    get(record, key) reads a value (None: not logged), the steady windows' range too."""
    runs = {n: list(rs) for n, rs in by_config.items()}
    keys = WINDOWED.get(metric)
    ranges = {n: [tuple(get(r, k) for k in keys) for r in rs] for n, rs in runs.items()} if keys else None
    return judge({n: [get(r, metric) for r in rs] for n, rs in runs.items()}, metric, floor_min, ranges)


def judge_rows(rows: list[dict], metric: str = DEFAULT_METRIC, floor_min: float = 0.0) -> Verdict:
    """judge over a sweep's per-job rows: the FINISHED ones, by configuration (repeats.config_key)."""
    done = [r for r in rows if r.get("status") == "FINISHED"]
    return judge_runs(group_by(done, config_key), metric, floor_min, dict.get)


def settings(tags: Mapping[str, str]) -> tuple[str, float]:
    """(metric, floor_min) a sweep's parent says it was judged by (its tags); the defaults else."""
    try:
        floor_min = float(tags.get(FLOOR_MIN_TAG, 0.0))
    except ValueError:
        floor_min = 0.0
    metric = tags.get(METRIC_TAG, DEFAULT_METRIC)
    return (metric if metric in COMPARED else DEFAULT_METRIC), floor_min


def compare(
    ref: str, name: str, medians: Mapping[str, Spread], floor: float | None, sense: str, source: str | None = REPEATS
) -> Comparison:
    """`actors=4 is 41.0% faster than actors=2; noise floor 8.0%: told apart` (`2.56x faster` from
    2x: how_much; or `not told apart`, or with the floor unknown, says so; a windows' floor says
    so); `ref`: the best or another pick."""
    a, b = medians[ref].median, medians[name].median
    d = difference(a, b)
    told = None if floor is None else d > floor
    faster = (a < b) if sense == "lower" else (a > b)
    head = (
        f"{ref} is {how_much(d)} {'faster' if faster else 'slower'} than {name}"
        if d > 0
        else f"{ref} and {name} have the same median"
    )
    tail = (
        UNKNOWN_FLOOR
        if floor is None
        else f"{floor_words(floor, source)}: {'told apart' if told else 'not told apart'}"
    )
    return Comparison(name, d, told, f"{head}; {tail}")


def against(v: Verdict, ref: str) -> tuple[Comparison, ...]:
    """`ref`'s comparisons with every other configuration by v's medians and noise floor (a
    pick other than the best: the report's recommendation, which may trade time for energy)."""
    if ref not in v.medians:
        return ()
    return tuple(compare(ref, n, v.medians, v.floor, COMPARED[v.metric], v.source) for n in v.medians if n != ref)


def answer(v: Verdict) -> str:
    """The verdict in one sentence: the best, what it is not told apart from, against the floor
    (each difference in how_much's words)."""
    if v.best is None:
        why = (
            " (a job with fewer steady windows than tracking.steady_min_windows has none: its tag `unmeasured` "
            "says why)"
        )
        return f"no verdict: no finished job logged {v.metric}" + (why if v.metric in WINDOWED else "")
    head = f"Best by median {v.metric}: {v.best}"
    if not v.comparisons:
        return f"{head} (the only configuration with a value)"
    if v.floor is None:
        return f"{head}; {v.floor_text()}"
    if v.tied:
        near = ", ".join(f"{c.name} ({how_much(c.difference)} slower)" for c in v.comparisons if c.name in v.tied)
        return f"{head}; not told apart from {near}: {v.floor_words}"
    nearest = min(v.comparisons, key=lambda c: c.difference)
    return (
        f"{head}; told apart from all others: at least {how_much(nearest.difference)} faster "
        f"than {nearest.name} ({v.floor_words})"
    )


def label(v: Verdict, name: str) -> str | None:
    """A configuration's verdict in a few words (the runs' tag `verdict`, its difference in
    how_much's words); None: not judged."""
    floor = v.floor_words
    if name == v.best:
        return f"best; {floor}" if v.comparisons else "best"
    comp = next((c for c in v.comparisons if c.name == name), None)
    if comp is None:
        return None
    if comp.told_apart is None:
        return f"{how_much(comp.difference)} slower than best; {floor}"
    said = "not told apart from best" if not comp.told_apart else "slower than best"
    return f"{said}: {how_much(comp.difference)} slower; {floor}"


# The report's parts of the answer: the knee, the recommended ratio, the paper's rule.


@dataclass(frozen=True)
class Knee:
    actors: int | None  # None: fewer than two points
    runtime_s: float | None  # the knee's task time
    gain_after: float | None  # the largest share of the task's time any larger actor count saved
    reached: bool  # False: still saving >= share at the largest actor count swept
    text: str
    spread: float | None = None  # the sweep's noise floor (relative, the rule's, above); None: unknown
    runs: dict = field(default_factory=dict)  # actors -> its runs' runtime_s (Spread.as_dict); the report's


def knee(
    runtimes: dict[int, float], share: float = 0.10, fps: dict[int, float] | None = None, floor: float | None = None
) -> Knee:
    """runtimes: actors -> runtime_s (the task's time, the median of its runs); fps: actors ->
    the actors' fps, stated beside; floor: the sweep's noise floor (the rule's, above;
    None: unknown, one run each). The knee is the smallest actor count whose task no larger
    actor count shortens by `share` or more and told apart (a relative difference above the
    floor): the task's time, not the actors' rate, since a learner that bounds the task makes
    faster actors worth nothing."""
    xs = sorted(runtimes)
    if len(xs) < 2:
        return Knee(None, None, None, False, f"needs at least two actor counts, got {len(xs)}")
    tail = "" if floor is not None else f"; {UNKNOWN_FLOOR}"
    for i, a in enumerate(xs[:-1]):
        best = min(xs[i + 1 :], key=lambda b: runtimes[b])
        saved = 1 - runtimes[best] / runtimes[a] if runtimes[a] > 0 else 0.0
        d = difference(runtimes[a], runtimes[best])
        unclear = floor is not None and d <= floor
        if saved < share or unclear:
            how = (
                f"more actors shorten the task by at most {saved:.1%}"
                if saved > 0
                else "no larger actor count shortens the task"
            )
            if saved >= share:
                how = (
                    f"no larger actor count shortens the task measurably ({saved:.1%} shorter, within the noise floor)"
                )
            told = f" (not told apart: {how_much(d)} difference, noise floor {floor:.1%})" if unclear else ""
            return Knee(
                a,
                runtimes[a],
                saved,
                True,
                f"knee at {a} actors (task {runtimes[a]:.1f} s): {how} (threshold {share:.0%}); "
                f"at {best} actors: {_changes(runtimes, fps, a, best)}{told}{tail}",
                floor,
            )
    last, prev = xs[-1], xs[-2]
    return Knee(
        last,
        runtimes[last],
        None,
        False,
        f"no knee within the swept range: {prev} -> {last} actors: {_changes(runtimes, fps, prev, last)} "
        f"(threshold {share:.0%}); sweep further{tail}",
        floor,
    )


def _changes(runtimes: dict, fps: dict | None, a: int, b: int) -> str:
    """The task's time and the actors' fps from a to b actors, and which one bounds the task."""
    task = runtimes[b] / runtimes[a] - 1 if runtimes[a] > 0 else float("nan")
    text = f"task {task:+.1%}"
    if fps and fps.get(a) and fps.get(b) is not None:
        rate = fps[b] / fps[a] - 1
        text = f"actors' fps {rate:+.1%}, {text}"
        # the actors sped up, and by 10% more than the task's rate (frames / runtime_s) did:
        # compare rates with rates (a task 47% shorter ran 1.89x as fast, as did actors at +89%)
        if rate >= 0.10 and (1 + rate) * (1 + task) >= 1.10:
            text += ": the learner bounds the task, not the actors"
    return text


@dataclass(frozen=True)
class Recommendation:
    name: str
    ratio: float | None
    fps: float | None
    energy_j: float | None
    text: str
    runtime_spread: float | None = None  # max - min of its runs' runtime_s; None: one run (unknown)
    runs: int = 1
    tied: list[str] = field(default_factory=list)  # configurations not told apart from it (the verdict rule)
    noise_floor: float | None = None  # the verdict's (the rule's, above); None: unknown


def _pick(ok: list[dict], v: Verdict, tolerance: float) -> tuple[dict, str]:
    """The verdict's best; where every candidate's energy is known, the least energy per task
    among those within `tolerance` of its runtime_s (a few percent of time for fewer joules)."""
    fastest = next((j for j in ok if j["name"] == v.best), None) or min(ok, key=lambda j: j["runtime_s"])
    near = [j for j in ok if j["runtime_s"] <= (1 + tolerance) * fastest["runtime_s"]]
    if all(j.get("energy_j") is not None for j in near):
        how = (
            f"least energy per task among the jobs within {tolerance:.0%} of the best's task time"
            if len(near) > 1
            else f"best by median {v.metric}"
        )
        return min(near, key=lambda j: j["energy_j"]), how
    return fastest, f"best by median {v.metric} (energy per task not measured for all of them)"


def recommend(
    jobs: list[dict], tolerance: float = 0.05, ratios: bool = True, verdict: Verdict | None = None
) -> Recommendation | None:
    """jobs: dicts with name, ratio, runtime_s (time to finish the task), fps, energy_j (None
    when not measured): one per configuration, the medians of its runs, with `runtime_spread`
    (max - min of its runs' runtime_s, None or absent for one run), `runs` and `runtime_runs`
    (its runs' runtime_s). verdict: the sweep's (the rule's, above; None: judged here on
    runtime_runs). The pick (_pick) and the configurations not told apart from it by the
    verdict's noise floor. ratios=False (no GPU): the text names the job, not its ratio."""
    ok = [j for j in jobs if j.get("runtime_s") is not None]
    if not ok:
        return None
    v = verdict or judge({j["name"]: j.get("runtime_runs") or [j["runtime_s"]] for j in ok})
    pick, how = _pick(ok, v, tolerance)
    comps = against(v, pick["name"])
    tied = [c.name for c in comps if c.told_apart is False]
    text = _recommendation_text(pick, ok, how, ratios, v)
    text += "".join(f"; {c.text}" for c in comps if c.told_apart is False)
    if len(ok) > 1 and v.floor is None:
        text += f"; {v.floor_text()}"
    return Recommendation(
        pick["name"],
        pick.get("ratio"),
        pick.get("fps"),
        pick.get("energy_j"),
        text,
        pick.get("runtime_spread"),
        pick.get("runs") or 1,
        tied,
        v.floor,
    )


def _recommendation_text(pick: dict, ok: list[dict], how: str, ratios: bool, v: Verdict) -> str:
    energy = f"{pick['energy_j']:.0f} J per task" if pick.get("energy_j") is not None else "energy not measured"
    ratio = f"{pick['ratio']:.3g}" if pick.get("ratio") is not None else "unknown"
    fps = f"{pick['fps']:.0f} fps" if pick.get("fps") is not None else "fps unknown"
    runs = pick.get("runs") or 1
    span = f" (median of {runs} runs; {v.floor_text()})" if runs > 1 and v.floor is not None else ""
    task = f"task in {pick['runtime_s']:.1f} s{span}, {fps}, {energy}; {how}"
    if not ratios:
        return f"{pick['name']}: {task}"
    if len(ok) > 1 and len({j.get("ratio") for j in ok}) == 1:  # the ratio is not what the jobs differ in
        return f"{pick['name']}: {task}; every job ran at CPU/GPU ratio {ratio}, so this comparison picks no ratio"
    return f"CPU/GPU ratio {ratio} ({pick['name']}): {task}"


def study_rule(
    hardware_threads: int | None,
    units_total: int | None,
    unit: str,
    jobs: list[tuple[float, float]],
    single_run: bool = False,
) -> str:
    """The study argues RL systems want CPU threads / SMs >= 1 (its 40-SM job, ratio 1, took
    only 6% longer than with all 80 SMs). For this host: its ratio with every unit, how many
    units the rule says are enough, and how much longer the best swept job at ratio >= 1
    took than the fastest. jobs: (cpu_gpu_ratio, runtime_s) of the finished jobs (medians of
    repeats); single_run: each configuration ran once, so the verdict is said without a spread."""
    if not hardware_threads or not units_total:
        return "study's rule (ratio >= 1): not evaluated (host threads or compute units unknown)"
    host_ratio = hardware_threads / units_total
    text = (
        f"study's rule (ratio >= 1): this host has {hardware_threads} HW threads / {units_total} {unit}s = "
        f"ratio {host_ratio:.3g} with every unit, so the rule predicts that {min(hardware_threads, units_total)} "
        f"{unit}(s) are enough"
    )
    if not jobs:
        return text + "; no finished job to check it against"
    best = min(rt for _, rt in jobs)
    at_one = [rt for r, rt in jobs if r >= 1]
    if not at_one:
        return text + f"; no job ran at ratio >= 1 (sweep sm_limit <= {hardware_threads} to test it)"
    slower = min(at_one) / best - 1
    return text + (
        f"; measured: the best job at ratio >= 1 took {slower:+.0%} longer than the fastest "
        + ("(consistent with the rule)" if slower <= 0.10 else "(the rule does not hold here)")
        + (f"; {UNKNOWN_FLOOR}" if single_run else "")
    )


@dataclass(frozen=True)
class Result:
    """The answer of a sweep, a search or a report, computed once (rows_result, trials' judge_runs,
    report/findings.py study_result) and only rendered: the terminal's ending, the parent's note
    and metrics, the jobs' `verdict` tags, summary.json/csv, findings.json and the report's HTML.
    A part the computation could not judge is empty or None, and says why where it is rendered."""

    verdict: Verdict  # the rule's: best, noise floor, told apart or not
    knees: Mapping[str, Knee] = field(default_factory=dict)  # per actor series; {}: none with two actor counts
    bounds: Mapping[str, dict] = field(default_factory=dict)  # per job (its name): core/bound.py's Bound as a dict
    config_bounds: Mapping[str, dict] = field(default_factory=dict)  # per configuration, over its runs
    recommendation: Recommendation | None = None  # None: no finished job with a runtime
    study_rule: str | None = None  # the paper's rule (ratio >= 1) in words; None: not judged (a sweep's end)
    knee_share: float = 0.10  # the settings the knee and the recommendation were judged by
    tolerance: float = 0.05

    def label(self, name: str) -> str | None:
        """A configuration's `verdict` tag (Verdict.label)."""
        return self.verdict.label(name)


def rows_result(rows: list[dict], metric: str = DEFAULT_METRIC, floor_min: float = 0.0) -> Result:
    """A sweep's Result over its per-job rows (judge_rows): the verdict; the report judges the rest."""
    return Result(judge_rows(rows, metric, floor_min))


# --- a sweep's packs (pack=K: rlbench/sweeps/pack.py; the report reads them from the store) ---

NODE_JUDGED = (NODE_FPS, NODE_ENERGY)  # what the packs' verdicts compare
TAGS = {NODE_FPS: "packing_fps", NODE_ENERGY: "packing_energy"}  # the sweep parent's tags of those verdicts


def pack_verdicts(pack_rows: list[dict], floor_min: float) -> dict[str, Verdict]:
    """The node throughput's and the energy per task's verdicts over the packs (the sweep's one rule:
    medians over the repeats, told apart or not by their noise floor)."""
    return {
        m: judge_rows([r for r in pack_rows if r.get(m) is not None], m, floor_min) for m in (NODE_FPS, NODE_ENERGY)
    }


def packing_lines(verdicts: dict[str, Verdict], why: dict[str, str]) -> list[str]:
    """The terminal's words on packing: which K is best for each, told apart or not; where no pack
    has the figure, why (`why`: the first pack's reason)."""
    words = {NODE_FPS: "node throughput", NODE_ENERGY: "node energy per task"}
    return [
        f"Packing, {words[m]}: "
        + (v.answer() if v.best is not None else f"not compared: {why.get(m) or 'no pack has it'}")
        for m, v in verdicts.items()
    ]
