"""The walk from `actors=40` on the command line to `ActorRole` (docs/architecture.md, "The walk
from `actors=40` to `ActorRole`"): the rlbench calls on the stack at each moment the number is
stored anew, counted on a real `python -m rlbench` run in this process."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from tests.conftest import CARTPOLE_TINY, ROOT

# The calls in the order first seen, a call made again counted again (docs/architecture.md's table).
WALK = [
    "main",
    "checked_command_line",
    "compose_checked",
    "compose_config",
    "validate",
    "_typed",
    "task",
    "run_job",
    "train",
    "build_trainer",
    "wire_actors",
]
# Where the number is stored anew, each once: Hydra's composition (once: no second one), the
# typed config (once: validated once), the Job's frozen copy, and an object with a field of its
# own that holds it (the plan's Envs does not: its total is actors + eval envs).
HOLDERS = ["DictConfig", "Config", "Job", "AlgoContext", "ActorRole"]
# The folders of rlbench/ those calls sit in, in the same order, a run of calls in one folder
# counted once: cli/ twice (main, then Hydra's task), never back from train/ to prepare/ (the
# issue's "back and forth").
FOLDERS = ["cli", "prepare", "cli", "train"]


class Walk:
    """The moments and the distinct rlbench frames on the stack at them (kept alive: no id reused)."""

    def __init__(self):
        import rlbench

        self.roots = (str(Path(rlbench.__file__).parent), str(ROOT / "hydra_plugins"))
        self.moments: list[str] = []
        self.frames: list = []

    def seen(self, holder: str) -> None:
        self.moments.append(holder)
        f = sys._getframe(2)  # the caller of the wrapped constructor or loader
        stack = []
        while f is not None:
            if f.f_code.co_filename.startswith(self.roots):
                stack.append(f)
            f = f.f_back
        self.frames += [f for f in reversed(stack) if not any(f is g for g in self.frames)]

    def calls(self) -> list[str]:
        """From the command's main on (the tests' in-process runner, cli/stage.py run_main, left out)."""
        return [f.f_code.co_name for f in self._walked()]

    def folders(self) -> list[str]:
        """The folder of each call, a run of calls in one folder once."""
        names = [self._folder(f.f_code.co_filename) for f in self._walked()]
        return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]

    def _folder(self, file: str) -> str:
        root = next(r for r in self.roots if file.startswith(r))
        return Path(file).relative_to(root).parts[0] if root == self.roots[0] else "hydra_plugins"

    def _walked(self) -> list:
        return [f for f in self.frames if not f.f_code.co_filename.endswith("stage.py")]


def _holds(obj, number: int) -> bool:
    values = (
        [getattr(obj, f.name) for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else vars(obj).values()
    )
    return any(type(v) is int and v == number for v in values)


def _watch(patch, walk: Walk, cls, number: int, always: bool = False) -> None:
    init = cls.__init__

    def watched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if always or _holds(self, number):
            walk.seen(cls.__name__)

    patch.setattr(cls, "__init__", watched)


def test_the_walk_from_actors_40_to_the_actor_role(store, rlbench_main, monkeypatch):
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    from rlbench.config.schema import Config
    from rlbench.prepare import job, plan
    from rlbench.roles.actors import ActorRole
    from rlbench.roles.contract import AlgoContext

    walk = Walk()
    load = ConfigLoaderImpl.load_configuration

    def composed(self, *args, **kwargs):
        walk.seen("DictConfig")
        return load(self, *args, **kwargs)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", composed)
    frozen = job.Job.__post_init__

    def job_copy(self):
        frozen(self)
        walk.seen("Job")

    monkeypatch.setattr(job.Job, "__post_init__", job_copy)
    for cls in (Config, plan.Envs, plan.JobPlan, AlgoContext, ActorRole):
        _watch(monkeypatch, walk, cls, 40, always=cls is Config)
    # eval_envs=2: the envs' total (42) is not the number
    done = rlbench_main([*CARTPOLE_TINY, "actors=40", *store["overrides"], "eval_envs=2"])
    assert done.returncode == 0, done.stderr
    assert walk.calls() == WALK, walk.calls()
    assert walk.moments == HOLDERS, walk.moments
    assert walk.folders() == FOLDERS, walk.folders()


class Seen:
    """A Hydra callback (hydra.callbacks) that notes what it was told."""

    calls: list[str] = []

    def __getattr__(self, name):
        return lambda **kwargs: Seen.calls.append(name)


def test_a_single_run_runs_on_its_one_composition_as_hydras_run_would(store, rlbench_main, monkeypatch):
    """Hydra's run_job on the config main() composed and validated: the folder, its .hydra/
    files, HydraConfig and the config's callbacks as Hydra's run gives them, the config handed."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from rlbench.cli import run
    from rlbench.config.schema import Config
    from rlbench.prepare.job import handed

    got = {}

    def task(cfg):
        hc = HydraConfig.get()
        got.update(mode=hc.mode, out=hc.runtime.output_dir, handed=handed(list(hc.overrides.task))[0], cfg=cfg)
        return {}

    monkeypatch.setattr(run, "task", task)
    Seen.calls = []
    line = ["env=cartpole", "actors=40", *store["overrides"], f"+hydra.callbacks.seen._target_={__name__}.Seen"]
    done = rlbench_main(line)
    assert done.returncode == 0, done.stderr
    out = Path(store["db"].parent, "out")
    assert got["mode"] == RunMode.RUN and got["out"] == str(out)
    assert isinstance(got["handed"], Config) and got["handed"].actors == 40 and "hydra" not in got["cfg"]
    assert sorted(p.name for p in (out / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    assert (out / "__main__.log").exists()  # Hydra's job logging, as its run configures it
    assert Seen.calls == ["on_run_start", "on_job_start", "on_job_end", "on_run_end"]
