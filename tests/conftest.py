"""Shared fixtures: compose() the real config, and a private MLflow store per test."""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlbench.core.observers import JobObserver  # light: logging only

# Where the environment sets PYTHONDONTWRITEBYTECODE, every pytest process would rewrite the
# asserts of every test module again (~7 s of CPU per process, two processes with xdist) and
# compile rlbench again: let pytest and Python keep their caches (__pycache__/, git-ignored).
sys.dont_write_bytecode = False

# mlflow and rlbench's compose are imported where used: this file is loaded by every pytest
# process, pytest-xdist's controller included, which runs no test and starts its workers after.

ROOT = Path(__file__).resolve().parents[1]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The whole suite and the fast tier on a worker per core (tests/tiers.py), set before
    pytest-xdist reads -n."""
    from tests.tiers import parallel_tiers

    parallel_tiers(config)


@pytest.hookimpl(trylast=True)  # after -m's deselection
def pytest_collection_modifyitems(config, items):
    """A worker's collection, longest files first: the order pytest-xdist hands the files out."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from tests.tiers import by_weight

        items[:] = by_weight(items)


def pytest_itemcollected(item):
    """A test that needs CUDA carries the `gpu` marker, or the run stops here (before -m selects)."""
    from tests.tiers import lacks_gpu_marker

    if lacks_gpu_marker(item):
        raise pytest.UsageError(
            f"{item.nodeid} is skipped without CUDA but lacks the gpu marker: "
            "add pytest.mark.gpu, or `pytest -m gpu` leaves it out on a GPU host"
        )


def pytest_sessionstart(session):
    from tests.tiers import say_parallel

    say_parallel(session)


# A seconds-long CartPole job (the smoke workload's 40000 frames take ~25 s of CartPole on 2 cores):
# 3000 frames, the learner starts after 16 sequences and makes 2 updates.
CARTPOLE_TINY = [
    "env=cartpole",
    "workload=smoke",
    "workload.frames=3000",
    "workload.learner_updates=2",
    "algo.min_replay=16",
]


@pytest.fixture(autouse=True)
def no_env_kept_between_tests():
    """Each test makes its own envs: the process's env shelf (rlbench/envs/shelf.py), which a
    sweep's next job takes its envs from, is emptied after every test, so that a test that
    wraps or fakes its family's envs never gets another test's."""
    yield
    from rlbench.envs.shelf import SHELF

    SHELF.clear()


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_per_test_process():
    """Each test process computes on one intra-op thread: the tests' nets are tiny, and on 2
    cores shared by two pytest workers (or another job) torch's threads only contend (an LSTM
    step takes ~10x longer). Jobs the tests start as processes keep torch's default."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _registered(registry) -> tuple:
    """(name, target) of every plugin a registry holds now (tests register their own)."""
    return tuple((name, registry.target(name)) for name in registry)


@pytest.fixture(scope="session", autouse=True)
def compose_each_command_line_once():
    """rlbench.prepare.compose.compose_config (which compose_checked, compose_job and the commands
    call) composes a command line once per test process and returns a copy of it after: Hydra's
    compose takes ~0.3 s, a copy ~5 ms, and the tests compose the same lines again and again
    (255 compositions of 185 lines in the fast tier). The key holds everything the result
    depends on besides conf/: the overrides, the Hydra node, the working directory (in that node)
    and the registered algorithms and env families (whose schemas compose registers). Refusals
    raise every time: nothing is kept of a line that does not compose. A line of config groups
    and values is composed from its groups once, then its values are set as Hydra sets them
    (`_groups_and_values`, `_apply_values`): 700 validating tests compose ~30 group lines, not
    ~250 whole ones (tests/test_config.py checks both ways give the same config)."""
    import copy

    from rlbench.core import algorithms, env_families
    from rlbench.prepare import compose

    composed: dict[tuple, object] = {}
    uncached = compose.compose_config

    def cached(overrides, hydra_node: bool):
        key = (
            tuple(overrides),
            hydra_node,
            os.getcwd() if hydra_node else None,
            _registered(algorithms.ALGORITHMS),
            _registered(env_families.FAMILIES),
        )
        if key not in composed:
            composed[key] = uncached(overrides, hydra_node)
        return composed[key]

    def compose_config(overrides, hydra_node: bool = False):
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        split = None if hydra_node else _groups_and_values(list(overrides))
        if split is not None:
            with contextlib.suppress(HydraException, OmegaConfBaseException):  # refused: the whole line says how
                cfg = copy.deepcopy(cached(split[0], False))
                _apply_values(split[1], cfg)
                return cfg
        return copy.deepcopy(cached(list(overrides), hydra_node))

    compose_config.uncached = uncached
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compose, "compose_config", compose_config)
        _hydra_loads_once(patch, copy.deepcopy)
        yield


def _hydra_loads_once(patch: pytest.MonkeyPatch, deepcopy) -> None:
    """Hydra's own composition (its run and multirun in the commands' in-process `main()`, each
    sweep job's config) kept per test process as compose_config above: a copy of a line already
    composed (Hydra's run sets its node on the copy). The key holds what Hydra reads besides
    conf/: the line, the mode, the working directory, the search path, the job's name, the
    version base, the environment (less pytest's own) and the registered plugins."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.utils import JobRuntime
    from hydra.types import RunMode

    from rlbench.core import algorithms, env_families

    loaded: dict[tuple, object] = {}
    uncached = ConfigLoaderImpl.load_configuration

    def load_configuration(
        self, config_name, overrides, run_mode: RunMode, from_shell=True, validate_sweep_overrides=True
    ):
        from hydra import version

        env = tuple(sorted((k, v) for k, v in os.environ.items() if not k.startswith("PYTEST_")))
        key = (
            config_name,
            tuple(overrides),
            run_mode,
            from_shell,
            validate_sweep_overrides,
            os.getcwd(),
            str(self.config_search_path),
            _job_name(JobRuntime),
            version.getbase(),
            env,
            _registered(algorithms.ALGORITHMS),
            _registered(env_families.FAMILIES),
        )
        if key not in loaded:
            loaded[key] = uncached(self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
        return deepcopy(loaded[key])

    load_configuration.uncached = uncached
    patch.setattr(ConfigLoaderImpl, "load_configuration", load_configuration)


def _job_name(job_runtime) -> str | None:
    try:
        return job_runtime.instance().get("name")
    except KeyError:  # no job named yet in this process
        return None


def _groups_and_values(overrides: list[str]) -> tuple[list[str], list] | None:
    """The line split as the product's sweep splits a job (rlbench/prepare/grid.py,
    `groups_and_values`); None for a line that split does not cover here (a sweep, a Hydra
    override, one that does not parse): that line is composed whole."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from rlbench.prepare.compose import CONF_DIR
    from rlbench.prepare.grid import groups_and_values

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        split = groups_and_values(GlobalHydra.instance().config_loader().repository, overrides)
    hydras = split and any(o.is_hydra_override() for o in OverridesParser.create().parse_overrides(split[0]))
    return None if hydras else split


def _apply_values(values: list, cfg) -> None:
    """Hydra's own step that sets value overrides on the composed config (struct mode, as
    `_load_configuration_impl` applies them)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)


@pytest.fixture(scope="session")
def empty_store_db(tmp_path_factory) -> Path:
    """An MLflow SQLite store with its schema created once (its migrations take ~2.6 s; opening ~1 s),
    by the first pytest-xdist worker that needs it, in the session's folder; the others wait for it
    and use the same file (read only: tests copy it)."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's
    folder = root / "store-template"
    with FileLock(root / "store-template.lock"):
        if not (folder / "mlflow.db").exists():
            from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

            folder.mkdir(exist_ok=True)
            SqlAlchemyStore(f"sqlite:///{folder}/making.db", str(folder / "artifacts")).engine.dispose()
            (folder / "making.db").rename(folder / "mlflow.db")
    return folder / "mlflow.db"


@pytest.fixture
def store(tmp_path, empty_store_db) -> dict:
    """Overrides that point tracking and Hydra's output at tmp_path, whose store starts as a copy
    of the empty one (the schema as MLflow creates it; every test writes its own runs)."""
    shutil.copyfile(empty_store_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    return {
        "uri": uri,
        "db": tmp_path / "mlflow.db",
        "overrides": [
            f"tracking.uri={uri}",
            f"tracking.artifact_location={tmp_path}/artifacts",
            "tracking.experiment=test",
            "tracking.system_metrics=false",
            "eval_envs=0",  # tests of evaluation set it back; tiny jobs with 2 actors would step twice the envs
            f"hydra.run.dir={tmp_path}/out",
            f"hydra.sweep.dir={tmp_path}/multirun",
        ],
    }


@pytest.fixture
def compose_cfg():
    from rlbench.prepare.compose import compose_config

    def _compose(overrides: list[str]):
        return compose_config([o for o in overrides if not o.startswith("hydra.")])

    return _compose


def runs(uri: str, experiment: str = "test") -> list:
    import mlflow

    mlflow.set_tracking_uri(uri)
    if mlflow.get_experiment_by_name(experiment) is None:
        return []
    return mlflow.search_runs(experiment_names=[experiment], output_format="list")


def rlbench_cli(
    args: list[str], timeout: float = 120, extra_env: dict | None = None, module: str = "rlbench", **kw
) -> subprocess.CompletedProcess:
    """`python -m rlbench ARGS` (or `module`, a wrapper such as tests.full_disk) from the clone."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        **kw,
        check=False,
    )


def main_in_process(args: list[str], extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m rlbench ARGS` run as its main() in this process: the same command line check,
    Hydra run or sweep, exit code (SystemExit) and output, without ~10 s of a new interpreter's
    imports and first composes. For checks of what the command says and records; what only a
    process shows (its exit status as the shell sees it, signals, a child left behind, warnings
    printed to the terminal) stays with rlbench_cli. The environment, sys.argv, Hydra's
    singletons and the root logger's handlers are put back after."""
    import io

    from hydra.core.singleton import Singleton

    out, err = io.StringIO(), io.StringIO()
    state = copy.deepcopy(Singleton.get_state())  # a test's plugins and schemas stored by main() leave with it
    try:
        with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            for name, value in {"HYDRA_FULL_ERROR": "0", **(extra_env or {})}.items():
                patch.setenv(name, value)
            code = run_main(list(args))
    finally:
        Singleton.set_state(state)
    return subprocess.CompletedProcess(["rlbench", *args], code, out.getvalue(), err.getvalue())


def run_main(args: list[str]) -> int:
    """`python -m rlbench ARGS` as its main() in this process: its exit code; sys.argv (which
    Hydra's main reads) and the root logger's handlers put back after. A test's way to run the
    command line itself (the Python API, rlbench/api/, takes overrides, not a command line)."""
    from rlbench.cli import run as entry

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    argv, sys.argv = sys.argv, [str(ROOT / "rlbench" / "__main__.py"), *args]
    try:
        entry.main()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        sys.argv = argv
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture
def rlbench_main() -> Callable[..., subprocess.CompletedProcess]:
    """main_in_process, as a fixture."""
    return main_in_process


def wait_until(
    predicate: Callable[[], object],
    timeout_s: float,
    what: str | Callable[[], str] = "the condition",
    poll_s: float = 0.01,
) -> object:
    """Poll `predicate` until it returns something true, and return that; fail the test with
    `what` (a callable: its result then) if `timeout_s` passes first. For states another thread
    or process reaches that offer no event to wait on (a log line, a file, a database row)."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            pytest.fail(f"not reached in {timeout_s:g} s: {what() if callable(what) else what}")
        time.sleep(poll_s)  # the polling interval; the predicate, not this sleep, says when it is done
    return value


def sigterm_once_running(args: list[str], job_log: Path, timeout: float = 120) -> int:
    """Start `python -m rlbench args`, SIGTERM it once its job logs progress (read from the
    job's Hydra log, not the DB, which may be migrating); returns its exit code after
    checking that no process it started outlives it."""
    import signal

    import psutil

    proc = psutil.Popen([sys.executable, "-m", "rlbench", *args], cwd=ROOT)
    try:

        def logged_progress() -> bool:
            if job_log.exists() and "frames" in job_log.read_text():
                return True
            assert proc.poll() is None, f"rlbench exited ({proc.returncode}) before logging progress in {job_log}"
            return False

        wait_until(logged_progress, timeout, f"the job logging progress in {job_log}", poll_s=0.5)
        family = proc.children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.is_running():
            proc.kill()
    assert not [p for p in family if p.is_running()], "a child process outlived the job"
    return code


# --- real servers on loopback (tests/servers.py), started once per session -----------------


def _unavailable(reason: str):
    """Skip where a server cannot be installed or started; in CI that is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres():
    from tests.servers import Postgres, Unavailable

    try:
        import psycopg  # noqa: F401  (the driver of plain postgresql:// URLs, which the tests use)

        pg = Postgres().start()
    except (ImportError, Unavailable, OSError, subprocess.TimeoutExpired) as e:
        _unavailable(f"no PostgreSQL server here: {e}")
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def mlflow_server(postgres, tmp_path_factory):
    """`mlflow server` on 127.0.0.1 with its backend store in PostgreSQL, proxied artifacts in tmp."""
    from tests.servers import MlflowServer, Unavailable

    try:
        server = MlflowServer(postgres.create_db("mlflow"), tmp_path_factory.mktemp("mlflow-server")).start()
    except (Unavailable, OSError) as e:
        _unavailable(f"no mlflow server here: {e}")
    yield server
    server.stop()


@pytest.fixture
def server_store(mlflow_server, tmp_path, request) -> dict:
    """Like `store`, but every job logs to the shared server, in an experiment of this test's own."""
    experiment = f"test-{request.node.name}-{os.getpid()}"
    return {
        "uri": mlflow_server.url,
        "experiment": experiment,
        "overrides": [
            f"tracking.uri={mlflow_server.url}",
            f"tracking.experiment={experiment}",
            "tracking.system_metrics=false",
            "eval_envs=0",  # tests of evaluation set it back; tiny jobs with 2 actors would step twice the envs
            f"hydra.run.dir={tmp_path}/out",
            f"hydra.sweep.dir={tmp_path}/multirun",
        ],
    }


def plain_table(markdown: str) -> str:
    """A description's markdown tables as they read (rlbench/tracking/parent_note.py table_row):
    the cells' margins out, their non-breaking spaces as spaces."""
    return markdown.replace("&nbsp;", "").replace("\u00a0", " ")


class OnTick(JobObserver):
    """A job observer that calls `fn(metrics, step)` after each tick: what a test does to a
    running job (kill an actor process, ...)."""

    def __init__(self, fn: Callable[[dict, int], None]):
        self.fn = fn

    def tick(self, metrics: dict, step: int) -> None:
        self.fn(metrics, step)
