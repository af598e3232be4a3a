"""Prose where it belongs: a module's docstring says what the module is for in a few lines and
links docs/ for the rest.

Only rlbench/'s own source is read (the generated rlbench/remote/actors_pb2*.py is not).
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "rlbench"
MAX_LINES = 6  # of the docstring literal, its opening and closing quotes included


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if not p.name.startswith("actors_pb2"))


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _docstring_nodes(tree: ast.Module):
    """The docstring expressions of the module and of every class and function in it."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield first


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and every docstring line of `path`."""
    source = path.read_text()
    lines = source.splitlines()
    out = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    ]
    for doc in _docstring_nodes(ast.parse(source)):
        out += [(n, lines[n - 1]) for n in range(doc.lineno, doc.end_lineno + 1)]
    return sorted(out)


def module_docstring_problem(path: Path) -> str | None:
    """Why the module docstring of `path` is not a short one, or None."""
    tree = ast.parse(path.read_text())
    first = tree.body[0] if tree.body else None
    if not (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    ):
        return "no module docstring"
    lines = first.end_lineno - first.lineno + 1
    return f"module docstring of {lines} lines (at most {MAX_LINES})" if lines > MAX_LINES else None


def test_every_module_says_what_it_is_for_in_at_most_six_lines():
    found = modules()
    assert len(found) > 100, f"only {len(found)} modules under {PACKAGE}"
    wrong = [f"{_name(p)}: {why}" for p in found if (why := module_docstring_problem(p))]
    assert not wrong, f"{len(wrong)} modules (say what the module is for, link docs/ for the rest):\n  " + "\n  ".join(
        wrong
    )
