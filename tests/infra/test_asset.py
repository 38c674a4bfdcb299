"""The Lambda asset is complete, and holds the product only.

The stack's bundler is run again for this machine (the deployed asset holds Linux arm64
wheels this interpreter cannot load), and every handler the synthesized template names
is imported in an isolated interpreter whose path holds only what a Lambda has:

- the asset (``/var/task``);
- Powertools at the pinned version, installed by pip on its own (the public layer);
- boto3 and what it needs (the runtime), linked from this venv.

No site-packages, no ``PYTHONPATH``, no current directory: a handler that imports
something the asset lacks fails here instead of at its first invocation, and one that
drags in tooling (moto, the demo, the tests) is caught by what it loaded.
"""

from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import distribution, requires
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from costguard_infra import bundling
from tests.support import imports as probe_module

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS_DIR = ROOT / "functions"
SUPPORT_DIR = ROOT / "tests" / "support"
PROBE = Path(probe_module.__file__)

#: Top-level modules that must never load in a Lambda: tooling, test doubles, fixtures.
MUST_NOT_SHIP = (
    "moto",
    "werkzeug",
    "flask",
    "responses",
    "costguard_demo",
    "costguard.demo",
    "tests",
    "pytest",
    "_pytest",
    "hypothesis",
    "freezegun",
    "mypy_boto3_",
    "aws_cdk",
    "costguard_infra",
)
#: The one import in the shipped package that the asset cannot satisfy, by design:
#: ``costguard demo`` runs from a development install, never in a Lambda.
DEMO_IMPORT = {"in": "costguard.cli.demo", "module": "costguard_demo.run", "function": "cmd_demo"}


def _must_not_ship(name: str) -> bool:
    # "mypy_boto3_" is a prefix; every other entry is a module and its submodules
    return any(
        name.startswith(bad) if bad.endswith("_") else name == bad or name.startswith(f"{bad}.")
        for bad in MUST_NOT_SHIP
    )


@dataclass(frozen=True)
class LambdaFunction:
    logical_id: str
    handler: str
    asset_hash: str
    environment: dict[str, str]


def _functions(body: dict[str, Any]) -> list[LambdaFunction]:
    """Every Python function of the template, its handler, asset and literal environment
    (values CloudFormation resolves at deploy time become placeholders)."""
    found = []
    for logical_id, resource in body["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        props = resource["Properties"]
        assert str(props["Runtime"]).startswith("python"), f"{logical_id}: {props['Runtime']}"
        variables = props.get("Environment", {}).get("Variables", {})
        found.append(
            LambdaFunction(
                logical_id=logical_id,
                handler=props["Handler"],
                asset_hash=props["Code"]["S3Key"].removesuffix(".zip"),
                environment={
                    k: v if isinstance(v, str) else f"resolved-at-deploy-{k.lower()}"
                    for k, v in variables.items()
                },
            )
        )
    return found


def _closure(package: str) -> set[str]:
    """``package`` and the distributions it needs here (extras left out)."""
    seen: set[str] = set()
    todo = [package]
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name not in seen:
            seen.add(name)
            todo += [
                r.name
                for r in map(Requirement, requires(name) or [])
                if r.marker is None or r.marker.evaluate({"extra": ""})
            ]
    return seen


def _link_runtime(into: Path) -> list[str]:
    """boto3 and its dependencies, as the Lambda runtime provides them: each
    distribution's top-level modules linked from this venv, nothing else."""
    into.mkdir()
    names = sorted(_closure("boto3"))
    for name in names:
        dist = distribution(name)
        assert dist.files, f"{name}: no RECORD, cannot tell its files"
        tops = {
            f.parts[0]
            for f in dist.files
            if f.parts[0] not in {"..", "__pycache__", "bin"}
            and not f.parts[0].endswith((".dist-info", ".pth"))
        }
        for top in tops:
            (into / top).symlink_to(Path(str(dist.locate_file(top))))
    return names


def _powertools_layer(into: Path) -> None:
    """Powertools at the pinned version, alone, as the public layer holds it.

    The venv is installed under the same pins (``make install``: ``-c
    infra/lambda-constraints.txt``), so its Powertools is that release's wheel, unpacked:
    linked from there, as the runtime's boto3 is, instead of a pip install per run. Only
    when the venv holds another version is the pinned one installed by pip.
    """
    dist = distribution("aws-lambda-powertools")
    if dist.version == bundling.POWERTOOLS_VERSION:
        into.mkdir()
        info = f"aws_lambda_powertools-{dist.version}.dist-info"
        for top in ("aws_lambda_powertools", info):
            (into / top).symlink_to(Path(str(dist.locate_file(top))))
        return
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",  # the layer's own dependencies come from the runtime and asset
            "--only-binary=:all:",
            "--no-compile",
            "--target",
            str(into),
            f"aws-lambda-powertools=={bundling.POWERTOOLS_VERSION}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"pip could not install Powertools:\n{done.stderr}"


@dataclass(frozen=True)
class Isolated:
    asset: Path  # this machine's build of the asset
    powertools: Path
    runtime: Path
    runtime_distributions: list[str]

    @property
    def path(self) -> list[str]:
        # Lambda's order: the function's code, then layers, then the runtime's boto3.
        return [str(self.asset), str(self.powertools), str(self.runtime)]


@pytest.fixture(scope="session")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Isolated:
    base = tmp_path_factory.mktemp("lambda")
    asset = base / "asset"
    asset.mkdir()
    # GIVEN the stack's bundler, pointed at this machine instead of Lambda's arm64 3.13
    bundling.PipBundling(FUNCTIONS_DIR, platform=None, python_version=None).try_bundle(str(asset))
    powertools = base / "powertools"
    _powertools_layer(powertools)
    runtime = base / "runtime"
    return Isolated(asset, powertools, runtime, _link_runtime(runtime))


@pytest.fixture(scope="session")
def probes(isolated: Isolated, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each function's handler imported in its own isolated interpreter, with the
    function's environment and nothing else: ``{logical id: what the probe saw}``. The
    first probe then imports every module of the package and checks each import statement
    (``unresolved``); the same asset on the same path, so once is enough."""
    functions = _functions(body)
    assert functions, "the template has no Lambda function"
    seen: dict[str, dict[str, Any]] = {}
    for function in functions:
        request = {
            "path": isolated.path,
            "handler": function.handler,
            "package": "costguard",
            "walk": not seen,
        }
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_LAMBDA_FUNCTION_NAME": function.logical_id,
            "LAMBDA_TASK_ROOT": str(isolated.asset),
            **function.environment,
        }
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-B", str(PROBE), json.dumps(request)],
            capture_output=True,
            text=True,
            env=env,
            cwd=isolated.asset.parent,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{function.handler}: the probe failed\n{done.stderr}"
        seen[function.logical_id] = {**json.loads(done.stdout), "handler": function.handler}
    return seen


def _shipped_asset(synthesized: Any, body: dict[str, Any]) -> Path:
    (asset_hash,) = {f.asset_hash for f in _functions(body)}
    asset: Path = synthesized[2] / f"asset.{asset_hash}"
    assert asset.is_dir()
    return asset


def test_every_handler_in_the_template_imports_from_the_asset_alone(
    probes: dict[str, dict[str, Any]],
) -> None:
    handlers = {p["handler"] for p in probes.values()}
    assert {"costguard.handlers.scan.handler", "costguard.handlers.slack_notifier.handler"} <= (
        handlers
    )
    for logical_id, seen in probes.items():
        assert seen["error"] is None, f"{logical_id} ({seen['handler']}):\n{seen['error']}"
        assert seen["handler"].rpartition(".")[0] in seen["modules"]


def test_the_probe_sees_no_site_packages_and_no_working_directory(
    probes: dict[str, dict[str, Any]], isolated: Isolated
) -> None:
    for seen in probes.values():
        path = seen["sys_path"]
        assert path[:3] == isolated.path
        assert not [p for p in path if "site-packages" in p or p in {"", "."}], path
        # everything loaded that is not the standard library came from the three places
        stdlib = [p for p in path[3:] if p]
        for name, file in seen["modules"].items():
            if file is not None and name != "__main__":  # the probe script itself
                assert file.startswith((*isolated.path, *stdlib)), f"{name} from {file}"


def test_importing_the_handlers_loads_no_tooling_demo_or_tests(
    probes: dict[str, dict[str, Any]],
) -> None:
    for logical_id, seen in probes.items():
        loaded = sorted(name for name in seen["modules"] if _must_not_ship(name))
        assert loaded == [], f"{logical_id} ({seen['handler']}) loaded {loaded}"
        # and the reader saw what a handler does load: the product and Powertools
        assert {"costguard", "aws_lambda_powertools"} <= set(seen["modules"])


def test_every_import_in_the_shipped_package_resolves_in_the_asset(
    probes: dict[str, dict[str, Any]],
) -> None:
    # Imports inside functions run at the first invocation, not at import: each one is
    # checked too, so a lazy import of something the asset lacks fails here.
    seen = next(iter(probes.values()))
    unresolved = [
        {k: u[k] for k in ("in", "module", "function")} | {"line": u["line"], "why": u["why"]}
        for u in seen["unresolved"]
    ]
    assert [{k: u[k] for k in DEMO_IMPORT} for u in unresolved] == [DEMO_IMPORT], unresolved
    assert "No module named 'costguard_demo'" in unresolved[0]["why"]


def test_the_asset_holds_the_product_package_and_the_pinned_distributions_only(
    synthesized: Any, body: dict[str, Any]
) -> None:
    asset = _shipped_asset(synthesized, body)
    # GIVEN what each bundled distribution says it installed
    owned: set[str] = set()
    for record in asset.glob("*.dist-info/RECORD"):
        owned |= {line.split(",")[0].split("/")[0] for line in record.read_text().splitlines()}
    # THEN the asset's top level is the costguard package plus exactly those files
    assert {p.name for p in asset.iterdir()} == owned | {bundling.PACKAGE}
    assert {p.name.split("-")[0] for p in asset.glob("*.dist-info")} == {
        "annotated_types",
        "pydantic",
        "pydantic_core",
        "typing_extensions",
        "typing_inspection",
        "tzdata",
    }


def test_time_zones_resolve_from_the_asset_on_a_runtime_without_zoneinfo(
    isolated: Isolated, tmp_path: Path
) -> None:
    """Defect: answers keep "until tomorrow 09:00" in the deployment's time zone, and a
    Lambda runtime may carry no /usr/share/zoneinfo: the zones must ship in the asset."""
    # GIVEN an interpreter whose system time-zone path is empty, with the asset's path
    empty = tmp_path / "no-zoneinfo"
    empty.mkdir()
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]\n"
        "from costguard.domain.answers import time_zone\n"
        "print(time_zone('Europe/Berlin'))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", code, *isolated.path],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONTZPATH": str(empty)},
        timeout=60,
        check=False,
    )
    # THEN the zone is found (in the bundled tzdata), not refused
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Europe/Berlin"


def test_the_asset_holds_no_demo_tests_or_test_doubles(
    synthesized: Any, body: dict[str, Any]
) -> None:
    asset = _shipped_asset(synthesized, body)
    package = asset / bundling.PACKAGE
    files = [p.relative_to(asset) for p in asset.rglob("*") if p.is_file()]
    assert not [f for f in files if f.parts[0] in {"costguard_demo", "tests", "benchmarks"}]
    assert not (package / "demo").exists()
    tests = [
        f for f in package.rglob("*.py") if f.name == "conftest.py" or f.name.startswith("test")
    ]
    assert tests == []
    # no class of tests/support (the test doubles) is defined anywhere in the product
    doubles = {
        node.name for source in SUPPORT_DIR.glob("*.py") for node in _classes(source.read_text())
    }
    assert len(doubles) >= 5  # the reader found them
    shipped = {
        node.name: path.relative_to(asset)
        for path in package.rglob("*.py")
        for node in _classes(path.read_text())
    }
    assert sorted(doubles & set(shipped)) == []


def test_the_asset_imported_here_is_the_asset_that_ships_but_for_the_wheels(
    synthesized: Any, body: dict[str, Any], isolated: Isolated
) -> None:
    shipped = _shipped_asset(synthesized, body)
    # the same product files, byte for byte, and the same pinned distributions
    product = sorted(
        str(p.relative_to(shipped)) for p in (shipped / "costguard").rglob("*") if p.is_file()
    )
    built = sorted(
        str(p.relative_to(isolated.asset))
        for p in (isolated.asset / "costguard").rglob("*")
        if p.is_file()
    )
    assert built == product
    _match, mismatch, errors = filecmp.cmpfiles(shipped, isolated.asset, product, shallow=False)
    assert (mismatch, errors) == ([], [])
    assert sorted(p.name for p in shipped.glob("*.dist-info")) == sorted(
        p.name for p in isolated.asset.glob("*.dist-info")
    )


def test_the_runtime_stand_in_is_boto3_and_its_dependencies_only(isolated: Isolated) -> None:
    assert isolated.runtime_distributions == [
        "boto3",
        "botocore",
        "jmespath",
        "python-dateutil",
        "s3transfer",
        "six",
        "urllib3",
    ]
    assert sorted(p.name for p in isolated.powertools.iterdir()) == [
        "aws_lambda_powertools",
        f"aws_lambda_powertools-{bundling.POWERTOOLS_VERSION}.dist-info",
    ]


def _classes(source: str) -> list[Any]:
    import ast

    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef)]
