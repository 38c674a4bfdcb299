"""Post Block Kit messages to a Slack incoming webhook, whose URL is in Secrets Manager.

Retries 429 (honouring ``Retry-After``) and 5xx with backoff, a bounded number of
times; anything else, or a persistent failure, raises so that the Lambda's retries
and its dead-letter queue take over. The URL is never logged.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_ATTEMPTS = 5
MAX_RETRY_AFTER_S = 30.0


class SlackDeliveryError(Exception):
    """Slack refused the message, or kept failing after the retries."""


@dataclass
class CachedSecret:
    """Reads a secret once per ``ttl_s`` (warm Lambdas reuse it)."""

    client: Any
    secret_id: str
    ttl_s: float = 300.0
    clock: Callable[[], float] = time.monotonic
    _value: str | None = None
    _read_at: float = 0.0

    def get(self) -> str:
        if self._value is None or self.clock() - self._read_at > self.ttl_s:
            self._value = str(
                self.client.get_secret_value(SecretId=self.secret_id)["SecretString"]
            ).strip()
            self._read_at = self.clock()
        return self._value


class SlackWebhook:
    def __init__(
        self,
        url: Callable[[], str],
        *,
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._url = url
        self._timeout = timeout_s
        self._sleep = sleep
        self._max_attempts = max_attempts

    def post(self, payload: dict[str, Any]) -> int:
        """POST the payload; return the number of attempts it took."""
        url = self._url()
        if not url.startswith(("https://", "http://127.0.0.1", "http://localhost")):
            raise SlackDeliveryError("the Slack webhook secret does not hold an https URL")
        body = json.dumps(payload).encode()
        last = ""
        for attempt in range(1, self._max_attempts + 1):
            request = urllib.request.Request(  # noqa: S310 - scheme checked above
                url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json; charset=utf-8"},
            )
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                    response.read()
                    return attempt
            except urllib.error.HTTPError as exc:
                status = exc.code
                last = f"HTTP {status}: {exc.read(200).decode(errors='replace')}"
                if status == 429:
                    delay = _retry_after(exc.headers.get("Retry-After"), attempt)
                elif status >= 500:
                    delay = min(0.5 * 2 ** (attempt - 1), MAX_RETRY_AFTER_S)
                else:
                    raise SlackDeliveryError(f"Slack rejected the message ({last})") from None
            except (urllib.error.URLError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                delay = min(0.5 * 2 ** (attempt - 1), MAX_RETRY_AFTER_S)
            if attempt < self._max_attempts:
                self._sleep(delay)
        raise SlackDeliveryError(f"Slack kept failing after {self._max_attempts} attempts ({last})")


def _retry_after(header: str | None, attempt: int) -> float:
    try:
        return min(max(float(header or ""), 0.0), MAX_RETRY_AFTER_S)
    except ValueError:
        return min(1.0 * attempt, MAX_RETRY_AFTER_S)
