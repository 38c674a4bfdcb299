"""The Slack signing secret as an operator stores it: pasted from a file or a terminal, it
often ends with a newline. Slack signs without it; CostGuard reads the secret without the
whitespace around it, in the answer endpoint and in the notifier that signs the buttons."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from costguard.domain.signatures import ButtonClaims, read_button

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def stored(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters import base

    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sm = aws.client("secretsmanager", region_name="us-east-1")
    # as `aws secretsmanager put-secret-value --secret-string file://signing.txt` stores it
    sm.create_secret(Name="costguard/slack-signing-secret", SecretString=SLACK_SECRET + "\n")
    sm.create_secret(Name="costguard/link", SecretString="link-secret")
    yield sm
    parameters.clear_caches()
    base.DEFAULT_PROVIDERS.clear()


def test_a_trailing_newline_in_the_signing_secret_does_not_refuse_every_press(
    stored: Any,
) -> None:
    """GIVEN the signing secret stored with a trailing newline
    WHEN the answer endpoint reads it, and the notifier signs a warning's buttons with it
    THEN both use the secret Slack signs with (no newline), and the buttons still verify.

    Defect: the secret was used as stored, newline included: every request Slack signed
    failed its signature check (401 "the Slack signature does not match"), so no answer
    could ever be given, with nothing saying why.
    """
    from costguard.adapters.secrets import NamedSecrets
    from costguard.handlers.slack_notifier import button_signer

    secrets = NamedSecrets("costguard/slack-signing-secret", "costguard/link")
    assert secrets.slack_signing_secret() == SLACK_SECRET.encode()
    value = button_signer("costguard/slack-signing-secret")("g", "k", ("U1",))
    assert read_button(SLACK_SECRET.encode(), value) == ButtonClaims("g", "k", ("U1",))
