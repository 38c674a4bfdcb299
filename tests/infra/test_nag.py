"""cdk-nag: zero unacknowledged findings, and no acknowledgement without a finding."""

from __future__ import annotations

import pytest

from costguard_infra.app_builder import ACKNOWLEDGEMENTS
from tests.infra.synth import nag_findings

pytestmark = pytest.mark.infra


def test_every_acknowledgement_matches_a_finding_of_the_stack_today() -> None:
    # GIVEN the app synthesized with no acknowledgement at all
    findings = nag_findings()
    # THEN each acknowledgement is needed: one that matches nothing applies stack-wide and
    # would silently approve the next finding with that id
    dead = sorted(set(ACKNOWLEDGEMENTS) - findings)
    assert dead == [], f"acknowledgements that match no cdk-nag finding: {dead}"
    # AND every finding is acknowledged (the session synth raises otherwise; this names them)
    assert sorted(findings - set(ACKNOWLEDGEMENTS)) == []
