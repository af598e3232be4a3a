"""Typed errors: library code raises them (rlbench/core/errors.py) and only the commands end
the process; the one wrapper (rlbench/cli/command.py) turns each into one line and its exit code
(docs/architecture.md, "Errors and exit codes")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlbench.cli.command import command, exits
from rlbench.config.rules import ConfigError
from rlbench.core.errors import Failure, Refusal
from rlbench.prepare.preflight import PreflightError

PACKAGE = Path(__file__).resolve().parents[1] / "rlbench"

# Below the commands, only a stop ends the process itself: the SIGTERM backstop's daemon thread
# prints the stop's line and exits where the main thread is blocked, and no exception can reach
# a command from there (rlbench/core/signals.py). (file, function) -> why.
ALLOWED: dict[tuple[str, str], str] = {
    ("core/signals.py", "exit_stopped"): "a stop's exit, also from the backstop's thread",
    ("core/signals.py", "stopped"): "the stop's line, also from the backstop's thread",
}


def in_commands_home(path: Path, package: Path = PACKAGE) -> bool:
    """The commands: rlbench/cli/, and the `python -m` doors that call a command's main (a
    package's __main__.py, a module of rlbench/ itself)."""
    rel = path.relative_to(package)
    return rel.parts[0] == "cli" or path.name == "__main__.py" or len(rel.parts) == 1


def _is(node: ast.AST, dotted: str) -> bool:
    return ast.unparse(node) == dotted


def ends_or_writes(node: ast.AST) -> str | None:
    """What `node` does that only a command may: exit the process or write to stderr."""
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if _is(exc, "SystemExit"):
            return "raise SystemExit"
    if not isinstance(node, ast.Call):
        return None
    name = ast.unparse(node.func)
    if name in ("sys.exit", "exit", "quit", "os._exit"):
        return f"{name}()"
    if name in ("sys.stderr.write", "sys.__stderr__.write"):
        return name
    if name == "print" and any(k.arg == "file" and "stderr" in ast.unparse(k.value) for k in node.keywords):
        return "print(file=sys.stderr)"
    return None


def exits_below_the_commands(package: Path = PACKAGE) -> list[str]:
    """`file:line function: what` for each exit or stderr write outside the commands' home."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if in_commands_home(path, package):
            continue
        rel = path.relative_to(package).as_posix()
        for node, name in walk_in_functions(ast.parse(path.read_text(), str(path))):
            what = ends_or_writes(node)
            if what and (rel, name) not in ALLOWED:
                found.append(f"rlbench/{rel}:{node.lineno} {name}: {what}")
    return found


def walk_in_functions(node: ast.AST, name: str = "<module>"):
    """Every node under `node`, in order, with the name of the innermost function around it."""
    for child in ast.iter_child_nodes(node):
        yield child, name
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else name
        yield from walk_in_functions(child, inner)


def test_nothing_below_the_commands_exits_or_writes_to_stderr():
    found = exits_below_the_commands()
    assert not found, (
        "exits or stderr writes below the commands: raise a typed error (rlbench/core/errors.py) and let "
        "the command's wrapper (rlbench/cli/command.py) end with it:\n  " + "\n  ".join(found)
    )


def test_each_allowed_exit_is_still_there():
    """An allowance outlives nothing: each (file, function) of ALLOWED still exits or writes."""
    seen = set()
    for rel, name in ALLOWED:
        tree = ast.parse((PACKAGE / rel).read_text())
        if any(ends_or_writes(node) and inner == name for node, inner in walk_in_functions(tree)):
            seen.add((rel, name))
    assert seen == set(ALLOWED)


def test_the_check_sees_each_way_out(tmp_path):
    pkg = tmp_path / "rlbench"
    (pkg / "prepare").mkdir(parents=True)
    (pkg / "cli").mkdir()
    (pkg / "prepare" / "bad.py").write_text(
        "import os, sys\n"
        "def a():\n    sys.exit(2)\n"
        "def b():\n    print('x', file=sys.stderr)\n"
        "def c():\n    raise SystemExit(1)\n"
        "def d():\n    sys.stderr.write('x')\n"
        "def e():\n    os._exit(3)\n"
        "def f():\n    print('fine')\n    raise ValueError('fine')\n"
    )
    (pkg / "cli" / "ok.py").write_text("import sys\ndef main():\n    sys.exit(2)\n")
    (pkg / "prepare" / "__main__.py").write_text("import sys\nsys.exit(0)\n")
    assert exits_below_the_commands(pkg) == [
        "rlbench/prepare/bad.py:3 a: sys.exit()",
        "rlbench/prepare/bad.py:5 b: print(file=sys.stderr)",
        "rlbench/prepare/bad.py:7 c: raise SystemExit",
        "rlbench/prepare/bad.py:9 d: sys.stderr.write",
        "rlbench/prepare/bad.py:11 e: os._exit()",
    ]


def test_config_and_store_errors_are_refusals():
    assert issubclass(ConfigError, Refusal) and issubclass(PreflightError, Refusal)
    assert (Refusal.exit_code, Failure.exit_code) == (2, 1)


@pytest.mark.parametrize(
    "error, code, line",
    [
        (Refusal("actors=0: allowed: an integer >= 1"), 2, "prog: actors=0: allowed: an integer >= 1\n"),
        (ConfigError("seed=x: allowed: an integer"), 2, "prog: seed=x: allowed: an integer\n"),
        (Failure("2 of 3 jobs failed: a; b"), 1, "prog: 2 of 3 jobs failed: a; b\n"),
        (LookupError("--study 'x': no search parent run"), 2, "prog: --study 'x': no search parent run\n"),
    ],
)
def test_the_wrapper_ends_with_one_line_and_the_code(capsys, error, code, line):
    def main() -> int:
        raise error

    assert command("prog", refusing=(LookupError,))(main)() == code
    assert capsys.readouterr() == ("", line)
    with pytest.raises(SystemExit) as ended, exits("prog", refusing=(LookupError,)):
        raise error
    assert ended.value.code == code and capsys.readouterr() == ("", line)


def test_the_wrapper_leaves_other_errors_and_results_alone(capsys):
    with pytest.raises(KeyError), exits("prog"):
        raise KeyError("a fault: a traceback, not a refusal")
    assert command("prog")(lambda: 0)() == 0
    assert capsys.readouterr() == ("", "")
