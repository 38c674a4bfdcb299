"""Lambda code without Docker: pip installs Linux wheels for the target into the asset.

boto3 comes with the Lambda runtime and Powertools with its public layer, so the
asset holds only the ``costguard`` package and pydantic (whose core is a compiled
wheel, hence ``--platform``). Only the product package is copied, and only it is the
asset's source (its hash): the demo (``costguard_demo``), the tests and their doubles
live outside it, so nothing has to be left out by name. The bundle is cached by CDK
per source hash.

The target platform and Python are parameters, the Lambda's by default: the tests
bundle the same asset for the machine they run on, to import every handler from it.

Deploy-time dependencies are pinned by one file, ``infra/lambda-constraints.txt``:
pydantic and its dependencies are installed under it, and the Powertools layer is
the public layer of exactly the Powertools version it names, so a deployment runs
what the tests ran, not whatever was newest that day.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

PYTHON_VERSION = "3.13"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
PLATFORM = "manylinux2014_aarch64"
#: The one package the Lambda functions run; everything else under functions/ is tooling.
PACKAGE = "costguard"
#: What the asset needs beyond the runtime (boto3) and the Powertools layer.
BUNDLED_REQUIREMENTS = ("pydantic", "tzdata")
#: Exact versions of everything the asset and the layer hold.
CONSTRAINTS = Path(__file__).resolve().parents[1] / "lambda-constraints.txt"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;#]+)\s*(?:#.*)?$")


def pinned_versions(path: Path = CONSTRAINTS) -> dict[str, str]:
    """``{normalized name: version}`` from a constraints file that may pin only with ``==``."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"{path.name}:{number}: pin with `name==version`, got {line!r}")
        pins[re.sub(r"[-_.]+", "-", match["name"]).lower()] = match["version"]
    return pins


POWERTOOLS_VERSION = pinned_versions()["aws-lambda-powertools"]


def constraints_digest(path: Path = CONSTRAINTS) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pip_command(
    output_dir: Path,
    constraints: Path = CONSTRAINTS,
    *,
    platform: str | None = PLATFORM,
    python_version: str | None = PYTHON_VERSION,
) -> Sequence[str]:
    """The pip invocation that fills the asset: binary wheels, pinned.

    For the Lambda (the defaults) the wheels are Linux arm64 CPython 3.13 ones,
    whatever machine bundles. ``platform=None, python_version=None`` installs for the
    interpreter running pip instead, so that a test can import the result.
    """
    target: list[str] = []
    if platform is not None:
        target += ["--platform", platform]
    if python_version is not None:
        target += ["--python-version", python_version]
    if target:
        target += ["--implementation", "cp"]
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--target",
        str(output_dir),
        *target,
        "--only-binary=:all:",
        "--no-compile",
        "--constraint",
        str(constraints),
        *BUNDLED_REQUIREMENTS,
    ]


@jsii.implements(cdk.ILocalBundling)
class PipBundling:
    """Fills the asset: the pinned wheels for ``platform``/``python_version`` (the
    Lambda's by default, see :func:`pip_command`), then the ``costguard`` package of
    ``functions_dir``, and nothing else from it."""

    def __init__(
        self,
        functions_dir: Path,
        *,
        platform: str | None = PLATFORM,
        python_version: str | None = PYTHON_VERSION,
    ) -> None:
        self._package = functions_dir / PACKAGE
        self._platform = platform
        self._python_version = python_version

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:
        out = Path(output_dir)
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            pip_command(out, platform=self._platform, python_version=self._python_version),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"bundling the Lambda code failed:\n{done.stdout}\n{done.stderr}")
        shutil.copytree(
            self._package,
            out / PACKAGE,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
        return True


def lambda_code(functions_dir: Path) -> lambda_.Code:
    return lambda_.Code.from_asset(
        # The package alone is the source: a change to the demo or the tests is not a
        # change to the Lambda code (same hash, same bundle).
        str(functions_dir / PACKAGE),
        exclude=["**/__pycache__", "**/*.pyc"],
        bundling=cdk.BundlingOptions(
            image=RUNTIME.bundling_image,
            # Unused by local bundling, but part of the asset hash: a changed pin makes a
            # new bundle instead of reusing the one cached in cdk.out under the old hash.
            environment={"COSTGUARD_CONSTRAINTS_SHA256": constraints_digest()},
            local=PipBundling(functions_dir),  # type: ignore[arg-type]  # jsii passes options positionally
            command=["false"],  # Docker is never used: local bundling always succeeds or raises
        ),
    )


def powertools_layer_parameter(version: str = POWERTOOLS_VERSION) -> str:
    """The public SSM parameter holding the layer ARN of one Powertools release."""
    return f"/aws/service/powertools/python/arm64/python{PYTHON_VERSION}/{version}"


def powertools_layer(scope: Any, construct_id: str) -> lambda_.ILayerVersion:
    """The public Powertools for AWS Lambda (Python) v3 layer of the pinned release,
    resolved at deploy time (never ``latest``: a deploy must not change the code)."""
    arn = cdk.aws_ssm.StringParameter.value_for_string_parameter(
        scope, powertools_layer_parameter()
    )
    return lambda_.LayerVersion.from_layer_version_arn(scope, construct_id, arn)
