"""Synthesize the app once per session (4-10 s) and share the template."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.synth import CONTEXT, Synthesized, synthesize, synthesize_org

__all__ = ["CONTEXT"]


@pytest.fixture(scope="session")
def synthesized() -> tuple[Any, Any, Any]:
    synth: Synthesized = synthesize()
    return synth.template, synth.stack, synth.directory


@pytest.fixture(scope="session")
def template(synthesized: Any) -> Any:
    return synthesized[0]


@pytest.fixture(scope="session")
def body() -> dict[str, Any]:
    """The synthesized template as plain JSON."""
    return synthesize().body


@pytest.fixture(scope="session")
def org_body() -> dict[str, Any]:
    """The Organization hub's template (``orgAccounts=discover``) as plain JSON."""
    return synthesize_org().body
