"""Deploy-time dependencies are pinned: the Lambda runs what the tests ran."""

from __future__ import annotations

import subprocess
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from costguard_infra import bundling

pytestmark = pytest.mark.infra

FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"


def _normalized(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


def _closure(package: str) -> set[str]:
    """``package`` and everything it needs in this environment (extras left out)."""
    seen: set[str] = set()
    todo = [package]
    while todo:
        name = _normalized(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_the_powertools_layer_is_the_release_the_tests_ran_with_never_latest(
    body: dict[str, Any],
) -> None:
    parameters = {
        p["Default"]
        for p in body["Parameters"].values()
        if str(p.get("Default", "")).startswith("/aws/service/powertools/")
    }
    installed = version("aws-lambda-powertools")
    assert parameters == {f"/aws/service/powertools/python/arm64/python3.13/{installed}"}
    assert installed == bundling.POWERTOOLS_VERSION


def test_the_bundler_runs_pip_with_the_constraints_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN pip replaced by a recorder
    calls: list[list[str]] = []

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(bundling.subprocess, "run", run)
    # WHEN the Lambda code is bundled
    bundling.PipBundling(FUNCTIONS_DIR).try_bundle(str(tmp_path))
    # THEN pip installs for the Lambda platform under the repository's constraints file
    (argv,) = calls
    assert argv[argv.index("--constraint") + 1] == str(bundling.CONSTRAINTS)
    assert bundling.CONSTRAINTS.is_file()
    assert argv[argv.index("--platform") + 1] == "manylinux2014_aarch64"
    assert (tmp_path / "costguard" / "handlers" / "scan.py").is_file()
    # and of functions/ it copies the product package alone, never the demo beside it
    assert (FUNCTIONS_DIR / "costguard_demo").is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["costguard"]


def test_the_bundler_targets_the_lambda_unless_told_to_target_this_interpreter(
    tmp_path: Path,
) -> None:
    lambda_argv = list(bundling.pip_command(tmp_path))
    assert lambda_argv[lambda_argv.index("--platform") + 1] == "manylinux2014_aarch64"
    assert lambda_argv[lambda_argv.index("--python-version") + 1] == "3.13"
    assert lambda_argv[lambda_argv.index("--implementation") + 1] == "cp"
    # the tests bundle for the machine they run on, to import the result
    host = list(bundling.pip_command(tmp_path, platform=None, python_version=None))
    assert not {"--platform", "--python-version", "--implementation"} & set(host)
    assert host[host.index("--constraint") + 1] == str(bundling.CONSTRAINTS)
    assert "--only-binary=:all:" in host


def test_the_constraints_pin_everything_the_asset_and_layer_hold_at_the_tested_versions() -> None:
    pins = bundling.pinned_versions()
    needed = _closure("pydantic") | _closure("tzdata") | {"aws-lambda-powertools"}
    assert needed <= set(pins), f"unpinned: {sorted(needed - set(pins))}"
    for name, pinned in pins.items():
        try:
            installed = version(name)
        except PackageNotFoundError:  # pragma: no cover - a pin for nothing installed
            pytest.fail(f"{name} is pinned but not installed in the test environment")
        assert pinned == installed, f"{name}: pinned {pinned}, tests ran with {installed}"


def test_the_bundled_asset_holds_exactly_the_pinned_distributions(synthesized: Any) -> None:
    directory: Path = synthesized[2]
    (asset,) = [
        d for d in directory.glob("asset.*") if (d / "costguard" / "handlers" / "scan.py").exists()
    ]
    bundled = {
        _normalized(d.name.removesuffix(".dist-info").rsplit("-", 1)[0]): d.name.removesuffix(
            ".dist-info"
        ).rsplit("-", 1)[1]
        for d in asset.glob("*.dist-info")
    }
    pins = bundling.pinned_versions()
    assert bundled == {name: pins[name] for name in bundled}
    assert "pydantic" in bundled and "pydantic-core" in bundled


def test_a_constraint_that_is_not_an_exact_pin_is_refused(tmp_path: Path) -> None:
    loose = tmp_path / "constraints.txt"
    loose.write_text("# comment\npydantic==2.14.4\npydantic-core>=2\n")
    with pytest.raises(ValueError, match=r"constraints.txt:3: pin with `name==version`"):
        bundling.pinned_versions(loose)
