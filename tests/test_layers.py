"""The package's import graph: no cycles, and no arrow running back up the layers
(docs/architecture.md draws them).

Every `import rlbench.x` / `from rlbench.x import y` under rlbench/ counts, the ones inside
functions too (a lazy import is still a dependency). Imports by name at run time
(the registries of rlbench/algo/__init__.py and rlbench/envs/__init__.py) are not seen: the
registry is the seam.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rlbench"

# Bottom to top. A module may import its own group and any group of a lower layer; groups of
# one layer stand beside each other and import neither. A pattern `x.*` places x and every
# module under it, a bare `x` that module only; the longest pattern wins, a bare one over `x.*`.
LAYERS: list[dict[str, list[str]]] = [
    {"base": ["rlbench", "rlbench.metrics", "rlbench.resources", "rlbench.progress", "rlbench.repeats",
              "rlbench.signals", "rlbench.bound",  # bound: a pure rule; the job names its bound by it
              "rlbench.observers",  # the hooks of a job's life (record, telemetry, progress observe it)
              "rlbench.registry",
              "rlbench.precision",  # a job's math precision: the refusal rule, autocast, published peaks
              "rlbench.remote", "rlbench.remote.address",  # an actor server's address rules: validate checks them
              "rlbench.remote.engine"]},  # gRPC core's engine, picked when the package is imported, before grpc starts
    {"config": ["rlbench.config", "rlbench.config.schema", "rlbench.config.argv", "rlbench.config.rules",
                "rlbench.config.flags", "rlbench.config.hydra_errors",  # command-line flags; Hydra's errors explained
                "rlbench.algo",  # the registry of algorithm names, imports by name only
                "rlbench.envs"]},  # the registry of env families, likewise
    {"envs": ["rlbench.envs.*"], "telemetry": ["rlbench.telemetry.*"], "tracking": ["rlbench.tracking.*"]},
    {"algo shared": ["rlbench.algo.common.*"]},  # what the algorithm packages share (seed_rl's common/)
    {"roles": ["rlbench.roles.*", "rlbench.runner"]},
    {"algorithms": ["rlbench.algo.*"]},
    {"plan": ["rlbench.plan"]},  # a job's plan: decided once, before any role starts; validate sizes by it  # one package each: r2d2, vtrace, random
    {"config checks": ["rlbench.config.validate", "rlbench.config.grid", "rlbench.config.compose",
                       "rlbench.config.command_line",
                       "rlbench.preflight", "rlbench.store_files"]},
    # actors in other processes over gRPC: above the config checks (ConfigError, and the actor
    # process composes a job's env config); the trainer will build RemoteEnvs
    {"remote": ["rlbench.remote.*"]},
    {"trainer": ["rlbench.trainer"]},
    {"job": ["rlbench.job", "rlbench.recording"], "predict": ["rlbench.predict.*"]},
    {"sweep": ["rlbench.sweep", "rlbench.submission"], "search": ["rlbench.search.*"], "report": ["rlbench.report.*"]},
    {"commands": ["rlbench.__main__", "rlbench.report.__main__", "rlbench.predict.__main__", "rlbench.predict.cli",
                  "rlbench.profile", "rlbench.actor"]},
    {"pipeline": ["rlbench.run_and_report"]},
]


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package (a package is its __init__)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its file."""
    def known(dotted: str) -> str:
        while dotted not in modules:  # `from rlbench.x import y`: y is a module, or a name in rlbench.x
            dotted = dotted.rpartition(".")[0]
        return dotted

    root = name.split(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {known(a.name) for a in node.names if a.name.split(".")[0] == root}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, up level - 1
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] == root:
                found |= {known(f"{source}.{a.name}") for a in node.names}
    return found - {name, ""}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
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
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def place(module: str) -> tuple[int, str] | None:
    """(layer index, group) of `module`: its longest pattern."""
    best, rank = None, (-1, False)
    for index, layer in enumerate(LAYERS):
        for group, patterns in layer.items():
            for pattern in patterns:
                base, wild = (pattern[:-2], True) if pattern.endswith(".*") else (pattern, False)
                if module == base or (wild and module.startswith(base + ".")):
                    key = (len(base), not wild)
                    if key > rank:
                        best, rank = (index, group), key
    return best


def test_the_cycle_finder_names_the_path():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_walk_sees_imports_inside_functions_and_from_imports_of_modules():
    graph = import_graph()
    assert "rlbench.config.validate" in graph["rlbench.__main__"]  # imported inside _entry
    assert "rlbench.config.compose" in graph["rlbench.__main__"]  # from rlbench.config.compose import CONF_DIR


def test_no_module_imports_itself_back():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_layer():
    unplaced = [m for m in import_graph() if place(m) is None]
    assert not unplaced, (f"modules in no layer: {unplaced}; place each in LAYERS (tests/test_layers.py) "
                          "and in docs/architecture.md")


def test_imports_run_down_the_layers():
    graph = import_graph()
    wrong = []
    for module in sorted(graph):
        layer, group = place(module)
        for target in sorted(graph[module]):
            t_layer, t_group = place(target)
            if t_layer > layer or (t_layer == layer and t_group != group):
                wrong.append(f"{module} ({group}, layer {layer}) -> {target} ({t_group}, layer {t_layer})")
    assert not wrong, ("imports up or sideways (move what is needed down, or the module up; "
                       "docs/architecture.md):\n  " + "\n  ".join(wrong))


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
    outside = [name for name, path in module_files().items()
               if place(name)[1] != "tracking" and imports_mlflow(path)]
    assert not outside, f"modules outside rlbench/tracking/ that import mlflow: {outside}; move the calls into the port"
