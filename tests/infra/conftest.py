"""Synthesize the app once per session (4-10 s) and share the template."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "infra"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

CONTEXT: dict[str, Any] = {
    **json.loads((ROOT / "cdk.json").read_text())["context"],
    "alertEmails": ["oncall@example.com", "finops@example.com"],
    "projects": {"llm-pretraining": {"budget": 60000, "owners": ["alice@example.com"]}},
}


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from aws_cdk.assertions import Template

    from costguard_infra.app_builder import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack = build_app(CONTEXT, outdir=str(outdir))
    assembly = app.synth()  # runs cdk-nag: any unacknowledged finding raises here
    return Template.from_stack(stack), stack, Path(assembly.directory)


@pytest.fixture(scope="session")
def template(synthesized: Any) -> Any:
    return synthesized[0]
