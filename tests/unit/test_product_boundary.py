"""Product and tooling are separate: the ``costguard`` package (what the Lambda asset
ships) never imports the demo or the tests; only the CLI's ``demo`` command reaches
the demo, lazily, from inside its function."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.imports import Import, imports_of

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"
TOOLING = ("costguard_demo", "costguard.demo", "tests", "benchmarks", "moto", "werkzeug")


def _is_tooling(name: str) -> bool:
    return any(name == t or name.startswith(f"{t}.") for t in TOOLING)


def _product_imports() -> dict[str, list[Import]]:
    found: dict[str, list[Import]] = {}
    for path in sorted((FUNCTIONS_DIR / "costguard").rglob("*.py")):
        parts = path.relative_to(FUNCTIONS_DIR).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        found[module] = imports_of(path.read_text(encoding="utf-8"), module, is_package=is_package)
    return found


def _tooling_imports(imports: dict[str, list[Import]]) -> list[tuple[str, str, str | None]]:
    return [
        (module, i.module, i.function)
        for module, statements in imports.items()
        for i in statements
        if _is_tooling(i.module)
        or any(_is_tooling(f"{i.module}.{name}") for name in i.names if i.module)
    ]


def test_only_the_cli_demo_command_imports_the_demo_and_only_inside_itself() -> None:
    # GIVEN every import statement of the product package, wherever it runs
    imports = _product_imports()
    assert "costguard.handlers.scan" in imports and "costguard.cli" in imports
    # THEN the one reach into tooling is `costguard demo` running the demo, lazily
    assert _tooling_imports(imports) == [("costguard.cli.demo", "costguard_demo.run", "cmd_demo")]


def test_the_demo_lives_outside_the_product_package() -> None:
    assert (FUNCTIONS_DIR / "costguard_demo" / "run.py").is_file()
    assert not (FUNCTIONS_DIR / "costguard" / "demo").exists()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import costguard_demo.fleet\n", [("costguard.cli", "costguard_demo.fleet", None)]),
        ("from costguard_demo import fleet\n", [("costguard.cli", "costguard_demo", None)]),
        (
            "def f():\n    from tests.support import fakes\n",
            [("costguard.cli", "tests.support", "f")],
        ),
        ("from costguard import demo\n", [("costguard.cli", "costguard", None)]),
        ("from . import demo\n", [("costguard.cli", "costguard", None)]),  # costguard.demo
        ("class C:\n    def g(self):\n        import moto\n", [("costguard.cli", "moto", "g")]),
        (
            "def f():\n    def g():\n        import werkzeug\n",
            [("costguard.cli", "werkzeug", "f.g")],
        ),
        ("if TYPE_CHECKING:\n    import moto\nelse:\n    import json\n", []),  # never runs
        ("import costguard_demonstration\nfrom .demos import x\n", []),  # other names
    ],
)
def test_the_reader_finds_every_way_of_importing_tooling(
    source: str, expected: list[tuple[str, str, str | None]]
) -> None:
    # GIVEN a module costguard/cli.py holding `source`
    imports = {"costguard.cli": imports_of(source, "costguard.cli")}
    # THEN its reaches into tooling are found, with the function they run in
    assert _tooling_imports(imports) == expected
