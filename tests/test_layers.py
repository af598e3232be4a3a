"""The package's import graph: every folder of rlbench/ is one floor, imports run down the
floors, never up or sideways, and there is no cycle (docs/architecture.md draws them).

Every `import rlbench.x` / `from rlbench.x import y` under rlbench/ counts, the ones inside
functions too. Imports by name at run time (the plugin registries, rlbench/core/registry.py)
are not seen: the registry is the seam.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rlbench"

# Bottom to top: the folders of rlbench/ on each floor. A module may import its own folder and
# any folder of a lower floor; folders of one floor stand beside each other and import neither.
# "" is rlbench/'s own modules: the commands, on top.
FLOORS: list[tuple[str, ...]] = [
    ("core",),  # the metric contract, resources, precision, observers, the registries
    ("config",),  # Hydra's schemas, rules, flags, ConfigError
    ("envs", "telemetry", "tracking"),  # the env families, the meters, MLflow's one port
    ("roles",),  # actors, central inference, the learner loop, the runner; the algorithms' contract
    ("algo",),  # one package per algorithm, and what they share (algo/common/)
    ("prepare",),  # compose, validate and plan a job; the stores' preflight
    ("remote",),  # actors in other processes and hosts over gRPC
    ("train",),  # one job: the roles wired (trainer), run_job, its record
    ("predict",),  # the model of a job; its measurements wire the roles as a job does (train/trainer.py)
    ("sweeps", "searches", "report"),  # many jobs under one parent, Optuna, the report
    ("api",),  # the Python API (sweep, search, make_report, the study) and Hydra's task function
    ("cli",),  # the commands, one module each, and their one wrapper (cli/command.py)
    ("",),  # the doors: python -m rlbench, rlbench.actor, rlbench.profile, rlbench.stage (and every __main__.py)
]
# Imports allowed to run up a floor, each with its reason (docs/architecture.md). None today.
ALLOWED_UP: dict[tuple[str, str], str] = {}


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package (a package is its __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def node_imports(name: str, is_init: bool, node: ast.stmt, modules: set[str]) -> set[str]:
    """The package's modules one import statement of module `name` loads (a package's own
    `__init__` is `is_init`)."""

    def known(dotted: str) -> str:
        while dotted not in modules:  # `from rlbench.x import y`: y is a module, or a name in rlbench.x
            dotted = dotted.rpartition(".")[0]
        return dotted

    root = name.split(".")[0]
    if isinstance(node, ast.Import):
        return {known(a.name) for a in node.names if a.name.split(".")[0] == root}
    if node.level:  # relative: from the module's package, up level - 1
        base = name.split(".") if is_init else name.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return {known(f"{source}.{a.name}") for a in node.names} if source.split(".")[0] == root else set()


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= node_imports(name, path.name == "__init__.py", node, modules)
    return found - {name, ""}


@functools.cache
def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Parsed once per test process (~0.5 s): the tests below read it, none changes it."""
    files = module_files(package)
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as its path [a, b, ..., a], or None."""
    state: dict[str, str] = {}  # "open" while on the path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def folder(module: str) -> str:
    """The folder of rlbench/ a module sits in ("" for rlbench/'s own modules and for every
    `__main__`: a `python -m` door that calls a command's main, on the doors' floor)."""
    parts = module.split(".")
    if parts[-1] == "__main__":
        return ""
    is_package = (PACKAGE.parent / Path(*parts) / "__init__.py").exists()
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and is_package) else ""


def place(module: str) -> tuple[int, str] | None:
    """(floor index, folder) of `module`, or None for a folder on no floor."""
    name = folder(module)
    for index, floor in enumerate(FLOORS):
        if name in floor:
            return index, name
    return None


def wrong_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run up a floor, or sideways to another folder of the same floor."""
    wrong = []
    for module in sorted(graph):
        layer, group = place(module)
        for target in sorted(graph[module]):
            t_layer, t_group = place(target)
            if (t_layer > layer or (t_layer == layer and t_group != group)) and (module, target) not in ALLOWED_UP:
                wrong.append(
                    f"{module} ({group or 'commands'}, floor {layer}) -> {target} "
                    f"({t_group or 'commands'}, floor {t_layer})"
                )
    return wrong


def test_the_cycle_finder_names_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_walk_sees_imports_inside_functions_and_from_imports_of_modules():
    graph = import_graph()
    assert "rlbench.train.job" in graph["rlbench.api.task"]  # imported inside task, the task function
    assert "rlbench.prepare.compose" in graph["rlbench.cli.run"]  # from rlbench.prepare.compose import CONF_DIR


def test_no_module_imports_itself_back():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_folder_is_a_floor():
    unplaced = sorted({folder(m) for m in import_graph() if place(m) is None})
    assert not unplaced, (
        f"folders of rlbench/ on no floor: {unplaced}; add each to FLOORS (tests/test_layers.py) "
        "and to docs/architecture.md"
    )


def test_imports_run_down_the_floors():
    wrong = wrong_imports(import_graph())
    assert not wrong, (
        "imports up or sideways (move what is needed down, or the module up; "
        "docs/architecture.md):\n  " + "\n  ".join(wrong)
    )


def test_the_floor_check_sees_an_import_up_and_one_sideways():
    graph = {
        "rlbench.core.metrics": {"rlbench.train.job"},
        "rlbench.envs.spec": {"rlbench.tracking.store"},
        "rlbench.train.job": {"rlbench.core.metrics"},
    }
    assert wrong_imports(graph) == [
        "rlbench.core.metrics (core, floor 0) -> rlbench.train.job (train, floor 7)",
        "rlbench.envs.spec (envs, floor 2) -> rlbench.tracking.store (tracking, floor 2)",
    ]
    assert place("rlbench.actor") == (len(FLOORS) - 1, "") and place("rlbench.algo.r2d2.math") == (4, "algo")


def imports_mlflow(path: Path) -> bool:
    """Whether the file imports mlflow (or a module under it) anywhere, inside functions too."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "mlflow" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "mlflow":
            return True
    return False


def test_the_mlflow_finder_sees_lazy_and_from_imports(tmp_path):
    (tmp_path / "lazy.py").write_text("def f():\n    import mlflow.entities\n")
    (tmp_path / "from_.py").write_text("from mlflow.exceptions import MlflowException\n")
    (tmp_path / "clean.py").write_text("import mlflowish\nfrom rlbench import mlflow\n")
    assert [imports_mlflow(tmp_path / f) for f in ("lazy.py", "from_.py", "clean.py")] == [True, True, False]


def test_only_tracking_imports_mlflow():
    """MLflow has one port (docs/architecture.md): everything else asks rlbench/tracking/."""
    outside = [name for name, path in module_files().items() if place(name)[1] != "tracking" and imports_mlflow(path)]
    assert not outside, f"modules outside rlbench/tracking/ that import mlflow: {outside}; move the calls into the port"


# The packages an import inside a function may keep off a command's start (docs/architecture.md,
# "Imports inside functions"): each takes a quarter of a second or more to import, beyond what
# its parent package loads (mlflow.store.db: MLflow's SQLAlchemy store).
HEAVY = {
    "torch",
    "mlflow",
    "grpc",
    "matplotlib",
    "optuna",
    "pandas",
    "ale_py",
    "envpool",
    "gymnasium",
    "mlflow.store.db",
}


def eager_imports(tree: ast.Module) -> list[ast.stmt]:
    """The import statements a module runs when it is imported: not those inside functions,
    nor under `if TYPE_CHECKING`."""
    found: list[ast.stmt] = []

    def walk(body):
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    walk(block)
            elif isinstance(node, ast.ClassDef):
                walk(node.body)

    walk(tree.body)
    return found


def outside(node: ast.stmt) -> set[str]:
    """The packages outside rlbench an import statement loads: each top-level name, and the
    heavy ones along its path (optuna.visualization.matplotlib loads matplotlib)."""
    names = (
        [a.name for a in node.names] if isinstance(node, ast.Import) else ([] if node.level else [node.module or ""])
    )
    out = set()
    for name in names:
        parts = name.split(".")
        out |= {parts[0]} | (set(parts[1:]) | {".".join(parts[:i]) for i in range(2, len(parts) + 1)}) & HEAVY
    return out - {"rlbench", ""}


class Loads:
    """Which heavy packages importing each module of the package loads, following its eager
    imports (and the packages above it, whose __init__ runs first)."""

    def __init__(self, package: Path = PACKAGE):
        files = module_files(package)
        self.names = set(files)
        self.eager = {}
        for name, path in files.items():
            nodes = eager_imports(ast.parse(path.read_text(), str(path)))
            own = set().union(*(node_imports(name, path.name == "__init__.py", n, self.names) for n in nodes)) - {name}
            self.eager[name] = (own, set().union(*(outside(n) for n in nodes)) & HEAVY)
        self._memo: dict[str, set[str]] = {}

    def heavy(self, module: str) -> set[str]:
        """Every heavy package importing `module` loads: its eager imports followed through (a
        package's __init__ runs before its modules; the walk may loop through them)."""
        if module not in self._memo:
            heavy, seen, todo = set(), {module}, [module]
            while todo:
                name = todo.pop()
                own, direct = self.eager[name]
                heavy |= direct
                parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)} & self.names
                todo += [m for m in own | parents if m not in seen]
                seen |= own | parents
            self._memo[module] = heavy
        return self._memo[module]


def lazy_imports(tree: ast.Module) -> list[ast.stmt]:
    """The import statements inside functions."""
    return [
        node
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(f)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def light_lazy_imports(package: Path = PACKAGE) -> list[str]:
    """Imports inside functions that keep no heavy package off a command's start (none that
    importing their own module does not load already), or that do not name the one they keep
    off in a comment on their lines."""
    loads, wrong = Loads(package), []
    for name, path in module_files(package).items():
        if "_pb2" in name:
            continue
        lines = path.read_text().splitlines()
        for node in lazy_imports(ast.parse("\n".join(lines), str(path))):
            own = node_imports(name, path.name == "__init__.py", node, loads.names)
            heavy = set().union(outside(node) & HEAVY, *(loads.heavy(m) for m in own)) - loads.heavy(name)
            said = " ".join(lines[node.lineno - 1 : node.end_lineno])
            if not heavy or not any(h in said.partition("#")[2] for h in heavy):
                where = f"{path.relative_to(package.parent)}:{node.lineno}"
                wrong.append(f"{where} loads {', '.join(sorted(heavy)) or 'nothing heavy'}: {ast.unparse(node)}")
    return wrong


def test_imports_inside_functions_keep_a_heavy_package_off_and_say_which():
    wrong = light_lazy_imports()
    assert not wrong, (
        "imports inside functions that keep nothing heavy off a command's start (move them to the "
        "top), or that do not name what they keep off in a comment:\n  " + "\n  ".join(wrong)
    )


def test_the_lazy_import_check_follows_eager_imports(tmp_path):
    pkg = tmp_path / "rlbench"
    (pkg / "core").mkdir(parents=True)
    for name, text in {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/light.py": "import json\n",
        "core/net.py": "import torch\n",
        "core/user.py": (
            "def a():\n    from rlbench.core import light\n"
            "def b():\n    from rlbench.core.net import x  # lazy: keeps torch off\n"
            "def c():\n    import mlflow\n"
            "def d():\n    import optuna.visualization.matplotlib  # lazy: matplotlib\n"
        ),
        "core/torchy.py": "import torch\ndef e():\n    from rlbench.core import net  # lazy: torch\n",
    }.items():
        (pkg / name).write_text(text)
    assert light_lazy_imports(pkg) == [
        "rlbench/core/torchy.py:3 loads nothing heavy: from rlbench.core import net",  # torch is loaded already
        "rlbench/core/user.py:2 loads nothing heavy: from rlbench.core import light",
        "rlbench/core/user.py:6 loads mlflow: import mlflow",
    ]


HYDRA_PRIVATE = ("_return_value", "_parse_config", "_apply_overrides_to_config")  # Hydra's private attributes


def hydra_private_uses(path: Path) -> list[str]:
    """Where a module reaches into Hydra's private parts: an import or a name of hydra._internal,
    or one of Hydra's private attributes."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [node.value]
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            else []
        )
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("hydra._internal")]
        if isinstance(node, ast.Attribute) and node.attr in HYDRA_PRIVATE:
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_hydras_private_parts_are_used_in_one_module_only():
    root = Path(__file__).resolve().parents[1]
    gathered = root / "rlbench" / "prepare" / "hydra_private.py"
    modules = [*(root / "rlbench").rglob("*.py"), *(root / "hydra_plugins").rglob("*.py")]
    assert [u for p in modules if p != gathered for u in hydra_private_uses(p)] == []
    assert hydra_private_uses(gathered)  # the walk sees them where they are
