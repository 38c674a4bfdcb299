"""Lambda code without Docker: pip installs Linux wheels for the target into the asset.

boto3 comes with the Lambda runtime and Powertools with its public layer, so the
asset holds only CostGuard and pydantic (whose core is a compiled wheel, hence
``--platform``). The bundle is cached by CDK per source hash.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

PYTHON_VERSION = "3.13"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
PLATFORM = "manylinux2014_aarch64"
#: What the asset needs beyond the runtime (boto3) and the Powertools layer.
BUNDLED_REQUIREMENTS = ("pydantic>=2.6,<3",)


@jsii.implements(cdk.ILocalBundling)
class PipBundling:
    def __init__(self, source: Path) -> None:
        self._source = source

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:
        out = Path(output_dir)
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
                str(out),
                "--platform",
                PLATFORM,
                "--implementation",
                "cp",
                "--python-version",
                PYTHON_VERSION,
                "--only-binary=:all:",
                "--no-compile",
                *BUNDLED_REQUIREMENTS,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"bundling the Lambda code failed:\n{done.stdout}\n{done.stderr}")
        shutil.copytree(
            self._source / "costguard",
            out / "costguard",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "demo"),
            dirs_exist_ok=True,
        )
        return True


def lambda_code(functions_dir: Path) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(functions_dir),
        exclude=["**/__pycache__", "*.egg-info"],
        bundling=cdk.BundlingOptions(
            image=RUNTIME.bundling_image,
            local=PipBundling(functions_dir),  # type: ignore[arg-type]  # jsii passes options positionally
            command=["false"],  # Docker is never used: local bundling always succeeds or raises
        ),
    )


def powertools_layer(scope: Any, construct_id: str) -> lambda_.ILayerVersion:
    """The public Powertools for AWS Lambda (Python) v3 layer, resolved at deploy time."""
    arn = cdk.aws_ssm.StringParameter.value_for_string_parameter(
        scope, f"/aws/service/powertools/python/arm64/python{PYTHON_VERSION}/latest"
    )
    return lambda_.LayerVersion.from_layer_version_arn(scope, construct_id, arn)
