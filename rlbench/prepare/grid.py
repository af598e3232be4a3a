"""A Hydra multirun's grid as jobs, each composed and validated before any job starts.

Light on purpose (no MLflow, no trainer): a sweep with one bad job is refused in seconds.
`repeats=N` makes every configuration N jobs, each naming its seed (`repeat_jobs`).
docs/jobs.md, "Refused early".
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlbench.config.rules import ConfigError
from rlbench.core.errors import Refusal
from rlbench.prepare.compose import CONF_DIR
from rlbench.prepare.hydra_errors import explain
from rlbench.prepare.hydra_private import BASIC_LAUNCHER, apply_values, preset_params
from rlbench.prepare.validate import VERDICT_RULES, validate

# Repeat k of a configuration gets seed + k * SEED_STRIDE: env i of a job is seeded seed + i, so
# the repeats' env seeds never meet while a job has at most SEED_STRIDE envs (seed_overlap warns).
SEED_STRIDE = 10_000


def in_process(launcher) -> bool:
    """Whether `launcher` runs the jobs in this process, one at a time: Hydra's basic launcher
    or a subclass. Told by name: Hydra's plugin scan executes that module again at each scan (each
    main() in one process), so an imported class is not the one a later scan instantiates."""
    return any((c.__module__, c.__qualname__) == BASIC_LAUNCHER for c in type(launcher).__mro__)


@dataclass
class Grid:
    """A sweep's jobs, and for each the configuration it repeats and which repeat it is."""

    jobs: list[list[str]]  # each job's overrides (with repeats > 1 each names its `seed=`)
    configs: list[str]  # per job: its configuration, its overrides less the repeats' seed
    repeat: list[int]  # per job: 0 .. repeats - 1
    repeats: int = 1


def repeat_seeds(repeats: int, seed: int, given: list[str] | None = None) -> list[str]:
    """The seed of each repeat: the `given` list (`seed=1,2,3`) when it has exactly `repeats`
    values, else seed + k * SEED_STRIDE. Raises ConfigError naming the key."""
    if repeats < 1:
        raise ConfigError(f"repeats={repeats}: allowed: an integer >= 1 (runs of each configuration)")
    if given is None:
        return [str(seed + k * SEED_STRIDE) for k in range(repeats)]
    if len(given) != repeats:
        raise ConfigError(
            f"seed: {len(given)} values ({','.join(given)}) but repeats={repeats}: give {repeats} seeds or one"
        )
    if len(set(given)) != len(given):
        raise ConfigError(f"seed: the repeats' seeds ({','.join(given)}) must differ: give {repeats} different seeds")
    return list(given)


def repeat_jobs(grid: list[list[str]], seeds: list[str]) -> Grid:
    """Every configuration of `grid` once per seed. With more than one seed each job gets its
    `seed=` override (a job reproducible alone), and the repeats are interleaved: every
    configuration's repeat 0, then every one's repeat 1, ..., so a slow spell of a shared host
    spreads over the configurations instead of landing on one of them."""
    configs = [" ".join(job) for job in grid]
    if len(seeds) <= 1:
        return Grid([list(job) for job in grid], configs, [0] * len(grid))
    jobs = [
        (list(job) + [f"seed={s}"], config, k)
        for k, s in enumerate(seeds)
        for job, config in zip(grid, configs, strict=True)
    ]
    return Grid([j for j, _, _ in jobs], [c for _, c, _ in jobs], [k for _, _, k in jobs], len(seeds))


def _search_repeats(override, search) -> None:
    """search.repeats (a trial's runs): one integer >= 1; ConfigError naming it, once per search."""
    if override is not None and override.is_sweep_override():
        raise ConfigError(
            f"search.repeats={','.join(override.sweep_string_iterator())}: allowed: one integer >= 1, "
            "not a list (every trial runs its configuration search.repeats times)"
        )
    value = override.value() if override is not None else search.get("repeats", 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"search.repeats={value!r}: allowed: an integer >= 1 (runs of each trial's configuration)")


def _repeats_and_seeds(overrides: list, config) -> tuple[int, list[str]]:
    """`repeats` (one value: the command line's, else the config's) and the repeats' seeds;
    ConfigError naming the key when `repeats` is swept or < 1, or a seed list does not match."""
    by_key = {o.key_or_group: o for o in overrides}
    r, s = by_key.get("repeats"), by_key.get("seed")
    if r is not None and r.is_sweep_override():
        raise ConfigError(
            f"repeats={','.join(r.sweep_string_iterator())}: allowed: one integer >= 1 per sweep, "
            "not a list (every configuration runs `repeats` times)"
        )
    repeats = r.value() if r is not None else config.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool):
        raise ConfigError(f"repeats={repeats!r}: allowed: an integer >= 1")
    if repeats < 1:
        raise ConfigError(f"repeats={repeats}: allowed: an integer >= 1 (runs of each configuration)")
    if config.get("search") is not None:
        _search_repeats(by_key.get("search.repeats"), config.search)
    if config.get("search") is not None and repeats != 1:
        raise ConfigError(
            f"repeats={repeats}: allowed with search=...: 1 only (a trial's runs are "
            f"search.repeats: search.repeats={repeats})"
        )
    if s is not None and s.is_sweep_override():
        if repeats == 1:
            return 1, []  # a seed grid: every seed is a configuration of its own
        return repeats, repeat_seeds(repeats, 0, list(s.sweep_string_iterator()))
    seed = s.value() if s is not None else config.get("seed", 1)
    if repeats > 1 and not isinstance(seed, int):
        raise ConfigError(f"seed={seed!r}: allowed: an integer")
    return repeats, repeat_seeds(repeats, seed) if repeats > 1 else []


def _allowed(ok, value) -> bool:
    try:
        return bool(ok(value))
    except TypeError:  # a value of another type (a word for a number)
        return False


def verdict_checks(overrides: list, config) -> None:
    """The sweep's verdict settings (verdict.metric, verdict.noise_floor_min), checked once
    before any job: ConfigError naming the key when one is a list or out of range."""
    by_key = {o.key_or_group: o for o in overrides}
    for key, (ok, allowed) in VERDICT_RULES.items():
        o = by_key.get(key)
        if o is not None and o.is_sweep_override():
            raise ConfigError(
                f"{key}={','.join(o.sweep_string_iterator())}: allowed: one value per sweep, not a list ({allowed})"
            )
        value = o.value() if o is not None else OmegaConf.select(config, key, default=None)
        if value is not None and not _allowed(ok, value):
            raise ConfigError(f"{key}={value!r}: allowed: {allowed}")


def grid_of(sweeper, arguments: list[str]) -> Grid:
    """The sweep's jobs (Hydra's grid of the preset's and the command line's overrides), each
    configuration `repeats` times; Refusal (exit 2) naming the key when repeats, seed or a
    verdict setting is wrong."""

    params = preset_params(sweeper) + list(arguments)
    overrides = OverridesParser.create(config_loader=sweeper.hydra_context.config_loader).parse_overrides(params)
    try:
        repeats, seeds = _repeats_and_seeds(overrides, sweeper.config)
        verdict_checks(overrides, sweeper.config)
    except ConfigError as e:
        raise Refusal(f"no job started: {e}") from e
    if repeats > 1:  # the repeats' seeds replace the seed override; repeats is the sweep's, not a job's
        overrides = [o for o in overrides if o.key_or_group not in ("seed", "repeats")]
    grid = [list(job) for batch in sweeper.split_arguments(overrides, None) for job in batch]
    return repeat_jobs(grid, seeds)


def expand_jobs(sweeper, arguments: list[str]) -> list[list[str]]:
    return grid_of(sweeper, arguments).jobs


def groups_and_values(repository, overrides: list[str]) -> tuple[list[str], list] | None:
    """`overrides` split as Hydra's defaults list splits them (hydra/_internal/defaults_list.py):
    those it composes the config from (config groups, `env=pong`; Hydra's own, `hydra.*`) and the
    parsed ones it sets on the composed config after (values, `actors=4`). None for a line that
    does not parse or holds a sweep: that line is composed whole."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return None
    if any(o.is_sweep_override() for o in parsed):
        return None
    group = [
        o.is_hydra_override() or (repository.group_exists(o.key_or_group) and not isinstance(o.value(), dict))
        for o in parsed
    ]
    return [o.input_line for o, g in zip(parsed, group, strict=True) if g], [
        o for o, g in zip(parsed, group, strict=True) if not g
    ]


class JobComposer:
    """Each job's config as Hydra's launcher composes it, the grid's jobs that pick the same
    config groups composed once: a job is its groups' composition with its values set by Hydra's
    own step (Hydra 1.3's `_apply_overrides_to_config`, as `_load_configuration_impl` sets them;
    tests/test_config.py pins the equality). A 40-job grid is refused in 8 s, not 15 (docs/jobs.md,
    "Refused early"). A job whose values do not apply is composed whole: Hydra's own error."""

    def __init__(self, loader, master_config):
        self.loader, self.master, self.composed = loader, master_config, {}

    def whole(self, job: list[str]):
        return self.loader.load_sweep_config(master_config=self.master, sweep_overrides=job)

    def __call__(self, job: list[str]):
        split = groups_and_values(self.loader.repository, job)
        if split is None:
            return self.whole(job)
        groups, values = split
        if tuple(groups) not in self.composed:
            self.composed[tuple(groups)] = self.whole(groups)
        cfg = copy.deepcopy(self.composed[tuple(groups)])
        try:
            apply_values(values, cfg)
        except (HydraException, OmegaConfBaseException):
            return self.whole(job)
        return cfg


def validate_jobs(sweeper, jobs: list[list[str]]) -> list:
    """Typed configs of every job; a Refusal (exit 2) naming every bad job if any is invalid."""
    compose, confs, problems = JobComposer(sweeper.hydra_context.config_loader, sweeper.config), [], []
    for job in jobs:
        try:
            confs.append(validate(compose(job)))
        except ConfigError as e:
            problems.append(f"job [{' '.join(job)}]: {e}")
        except (HydraException, OmegaConfBaseException) as e:  # a list's value of the wrong type or key
            problems.append(f"job [{' '.join(job)}]: {explain(e, job, CONF_DIR, compose)}")
    if problems:
        raise Refusal("no job started; invalid jobs in the sweep:\n" + "\n".join(problems))
    return confs


def seed_overlap(grid: Grid, confs: list) -> str | None:
    """A warning when two repeats' env seeds meet (env i of a job is seeded seed + i): the
    repeats' seeds closer together than a job's envs replay shifted copies of each other's
    episodes. Never with the default seeds (SEED_STRIDE apart) below SEED_STRIDE envs."""
    if grid.repeats == 1:
        return None
    seeds = sorted({c.seed for c in confs})
    envs = max(c.actors + c.eval_envs for c in confs)
    gap = min(b - a for a, b in itertools.pairwise(seeds)) if len(seeds) > 1 else None
    if gap is None or gap >= envs:
        return None
    return (
        f"seed: the repeats' seeds ({','.join(map(str, seeds))}) are {gap} apart, fewer than a job's "
        f"{envs} envs (actors + eval_envs; env i is seeded seed + i), so repeats share env seeds; "
        f"seeds at least {envs} apart (or one seed) keep them apart"
    )
