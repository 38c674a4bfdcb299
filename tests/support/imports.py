"""What a module imports, read from its source; and a probe that imports the Lambda
handlers in an interpreter that sees nothing but the Lambda's code.

Standard library only: ``python -I -S tests/support/imports.py '<json>'`` runs it in
an isolated interpreter (no site-packages, no ``PYTHON*`` variables, no current
directory on the path) whose ``sys.path`` is exactly the directories it is given.
It prints one JSON document; the test reads it and asserts.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import sys
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Import:
    """One ``import``/``from … import`` statement, resolved to absolute names."""

    module: str  # the module ``from`` names, or the one ``import`` names
    names: tuple[str, ...]  # what ``from module import …`` takes; () for ``import module``
    line: int
    function: str | None  # the enclosing function, None at module level (or in a class)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(source: str, module: str, *, is_package: bool = False) -> list[Import]:
    """Every import ``module`` runs (at import time or later, inside functions), with
    relative imports made absolute; imports under ``if TYPE_CHECKING:`` never run and
    are left out."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.orelse:
                visit(statement, function)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name if function is None else f"{function}.{node.name}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(alias.name, (), node.lineno, function))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = tuple(alias.name for alias in node.names)
            found.append(Import(base, names, node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), None)
    return found


def _check_import(statement: Import) -> str | None:
    """None if the statement would succeed here, else why not."""
    try:
        target = importlib.import_module(statement.module)
        for name in statement.names:
            if name != "*" and not hasattr(target, name):
                importlib.import_module(f"{statement.module}.{name}")
    except Exception as exc:  # reported, not raised
        return f"{type(exc).__name__}: {exc}"
    return None


def probe(path: list[str], handler: str, package: str, *, walk: bool = True) -> dict[str, Any]:
    """Import ``handler`` (``pkg.module.function``), note what that loaded, then (with
    ``walk``) import every module of ``package`` and check every import statement in it."""
    sys.path[:0] = path
    module_name, _, function = handler.rpartition(".")
    result: dict[str, Any] = {"handler": handler, "error": None}
    try:
        loaded = importlib.import_module(module_name)
        if not callable(getattr(loaded, function, None)):
            result["error"] = f"{module_name} has no callable {function!r}"
    except BaseException:  # SystemExit and all: the test must see it
        result["error"] = traceback.format_exc()
    result["modules"] = {
        name: getattr(module, "__file__", None)
        for name, module in sorted(sys.modules.items())
        if module is not None
    }

    if not walk:
        result["sys_path"] = list(sys.path)
        return result
    root = importlib.import_module(package)
    unresolved: list[dict[str, Any]] = []
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        spec = importlib.util.find_spec(info.name)
        assert spec is not None and spec.origin is not None
        source = Path(spec.origin).read_text(encoding="utf-8")
        for statement in imports_of(source, info.name, is_package=info.ispkg):
            why = _check_import(statement)
            if why is not None:
                unresolved.append({"in": info.name, **asdict(statement), "why": why})
    result["unresolved"] = unresolved
    result["sys_path"] = list(sys.path)
    return result


def main() -> None:
    request = json.loads(sys.argv[1])
    json.dump(
        probe(
            request["path"], request["handler"], request["package"], walk=request.get("walk", True)
        ),
        sys.stdout,
    )


if __name__ == "__main__":
    main()
