"""The verdict rule, written once: the best configuration and those not told apart from it.

By the median of one metric (COMPARED; runtime_s by default). The noise floor: the widest ratio
between two repeats of one configuration, less 1; without repeats, for a steady rate, of one
job's steady windows (at least the set minimum). docs/metrics.md, "The verdict".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

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
METRIC_TAG, FLOOR_MIN_TAG = "verdict_metric", "verdict_noise_floor_min"  # on a sweep's parent: how it judged


@dataclass(frozen=True)
class Comparison:
    name: str  # the configuration compared with the best
    difference: float  # relative: the larger median over the smaller, less 1
    told_apart: bool | None  # None: the noise floor is unknown
    text: str


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

    def answer(self) -> str:
        return answer(self)

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
    """`actors=4 is 41.0% faster than actors=2; noise floor 8.0%: told apart` (or `not told
    apart`, or with the floor unknown, says so; a windows' floor says so); `ref`: the best or another pick."""
    a, b = medians[ref].median, medians[name].median
    d = difference(a, b)
    told = None if floor is None else d > floor
    faster = (a < b) if sense == "lower" else (a > b)
    head = (
        f"{ref} is {d:.1%} {'faster' if faster else 'slower'} than {name}"
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
    """The verdict in one sentence: the best, what it is not told apart from, against the floor."""
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
        near = ", ".join(f"{c.name} ({c.difference:.1%} slower)" for c in v.comparisons if c.name in v.tied)
        return f"{head}; not told apart from {near}: {v.floor_words}"
    nearest = min(v.comparisons, key=lambda c: c.difference)
    return (
        f"{head}; told apart from every other configuration: at least {nearest.difference:.1%} faster "
        f"than {nearest.name} ({v.floor_words})"
    )


def label(v: Verdict, name: str) -> str | None:
    """A configuration's verdict in a few words (the runs' tag `verdict`); None: not judged."""
    floor = v.floor_words
    if name == v.best:
        return f"best; {floor}" if v.comparisons else "best"
    comp = next((c for c in v.comparisons if c.name == name), None)
    if comp is None:
        return None
    if comp.told_apart is None:
        return f"{comp.difference:.1%} slower than best; {floor}"
    said = "not told apart from best" if not comp.told_apart else "slower than best"
    return f"{said}: {comp.difference:.1%} slower; {floor}"
