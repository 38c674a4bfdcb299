"""Secrets Manager, read through Powertools Parameters: one cached read per secret and warm
container (``max_age``), shared by every Lambda that reads a CostGuard secret by its name or
ARN (the answer endpoint's signing and link secrets, the guards' link secret)."""

from __future__ import annotations

from aws_lambda_powertools.utilities.parameters import get_secret

from costguard.domain.signatures import signing_key

#: A warm container reads a secret again at most this often (a rotation lands within it).
SECRET_MAX_AGE_S = 300


def secret_bytes(name: str, max_age: int = SECRET_MAX_AGE_S) -> bytes:
    """The secret's value as bytes (a string secret UTF-8 encoded), from Powertools' cache
    when it is younger than ``max_age`` seconds."""
    value = get_secret(name, max_age=max_age)
    return value.encode() if isinstance(value, str) else bytes(value)


class NamedSecrets:
    """The answer endpoint's secrets by their names (or ARNs): the Slack app's signing
    secret, the link key and the Slack bot token, each read through :func:`secret_bytes`."""

    def __init__(self, slack_signing: str, links: str, bot_token: str = "") -> None:
        self._names = (slack_signing, links, bot_token)

    def slack_signing_secret(self) -> bytes:
        """As Slack signs with it: a pasted value's trailing newline is not part of it."""
        return signing_key(secret_bytes(self._names[0]))

    def link_secret(self) -> bytes:
        return secret_bytes(self._names[1])

    def slack_bot_token(self) -> bytes:
        """Empty when the deployment names no bot-token secret (the Exempt… dialog then says
        what to do instead)."""
        return secret_bytes(self._names[2]) if self._names[2] else b""
