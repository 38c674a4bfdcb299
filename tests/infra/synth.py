"""Synthesize the CostGuard app once per test process, for tests/infra and tests/e2e alike.

A synth takes 4-10 s and up to 1 GB, so every test that needs the template shares
this one (``functools.cache``); the output directory is removed when the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "infra") not in sys.path:
    sys.path.insert(0, str(ROOT / "infra"))
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

CONTEXT: dict[str, Any] = {
    **json.loads((ROOT / "cdk.json").read_text())["context"],
    "alertEmails": ["oncall@example.com", "finops@example.com"],
    "projects": {"llm-pretraining": {"budget": 60000, "owners": ["alice@example.com"]}},
}
ORG_ID = "o-abc1234567"
#: An Organization hub that discovers its accounts (the widest IAM of the hub).
ORG_CONTEXT: dict[str, Any] = {**CONTEXT, "orgAccounts": "discover", "orgId": ORG_ID}
#: One account with the answer endpoint on (issue 23), admins, a time zone, its throttle.
ANSWERS_CONTEXT: dict[str, Any] = {
    **CONTEXT,
    "answers": True,
    "answerAdmins": "U024BE7LH,ops@example.com",
    "timeZone": "Europe/Paris",
    "answerConcurrency": 7,
}


@dataclass(frozen=True)
class Synthesized:
    template: Any  # aws_cdk.assertions.Template
    stack: Any
    directory: Path

    @property
    def body(self) -> dict[str, Any]:
        """The template as plain JSON."""
        parsed: dict[str, Any] = json.loads(
            (self.directory / "CostGuard.template.json").read_text()
        )
        return parsed


def _tempdir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@contextlib.contextmanager
def with_toy_guard() -> Iterator[None]:
    """The shipped guards plus the test-only toy guard (tests/support/toy.py), so that the
    guard Lambdas' roles are checked on a guard whose every call a test replays."""
    from costguard.guards import SPECS
    from tests.support.toy import toy_spec

    added = "toy" not in SPECS
    if added:
        SPECS["toy"] = toy_spec()
    try:
        yield
    finally:
        if added:
            SPECS.pop("toy", None)


@functools.cache
def synthesize() -> Synthesized:
    """The app as ``cdk synth`` builds it (code bundled, cdk-nag on): one per process."""
    from aws_cdk.assertions import Template

    from costguard_infra.app_builder import build_app

    with with_toy_guard():
        app, stack = build_app(CONTEXT, outdir=str(_tempdir("costguard-cdk-")))
        assembly = app.synth()  # runs cdk-nag: any unacknowledged finding raises here
    return Synthesized(Template.from_stack(stack), stack, Path(assembly.directory))


@functools.cache
def synthesize_org() -> Synthesized:
    """The Organization hub (:data:`ORG_CONTEXT`) with cdk-nag on, code not bundled."""
    from aws_cdk.assertions import Template

    from costguard_infra.app_builder import build_app

    with with_toy_guard():
        app, stack = build_app(
            {**ORG_CONTEXT, "aws:cdk:bundling-stacks": []},
            outdir=str(_tempdir("costguard-org-")),
        )
        assembly = app.synth()  # runs cdk-nag: any unacknowledged finding raises here
    return Synthesized(Template.from_stack(stack), stack, Path(assembly.directory))


@functools.cache
def synthesize_answers() -> dict[str, Any]:
    """The app with answers on (:data:`ANSWERS_CONTEXT`), cdk-nag on (a finding raises), code
    not bundled: its template as plain JSON, one per process (tests/infra and tests/e2e)."""
    from aws_cdk.assertions import Template

    from costguard_infra.app_builder import build_app

    with with_toy_guard():
        app, stack = build_app(
            {**ANSWERS_CONTEXT, "aws:cdk:bundling-stacks": []},
            outdir=str(_tempdir("costguard-answers-")),
        )
        app.synth()  # runs cdk-nag: any unacknowledged finding raises here
    body: dict[str, Any] = Template.from_stack(stack).to_json()
    return body


def nag_findings(
    acknowledgements: dict[str, str] | None = None, context: dict[str, Any] | None = None
) -> set[str]:
    """The cdk-nag rule ids the app raises with only ``acknowledgements`` in force.

    Synthesizes without bundling (the Lambda code does not change a finding) and
    reads the validation report, which lists every unacknowledged finding.
    """
    from costguard_infra.app_builder import build_app

    outdir = _tempdir("costguard-nag-")
    with with_toy_guard():
        app, _stack = build_app(
            {**(CONTEXT if context is None else context), "aws:cdk:bundling-stacks": []},
            outdir=str(outdir),
            acknowledgements=acknowledgements or {},
        )
    try:
        app.synth()
    except RuntimeError as exc:
        if "ValidationFailed" not in str(exc):
            raise
    report = json.loads((outdir / "validation-report.json").read_text())
    return {
        violation["ruleName"].removeprefix("AwsSolutions::")
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
    }
