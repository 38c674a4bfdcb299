"""The one retry policy, for the few calls worth trying again on top of botocore's.

botocore already retries throttling and 5xx per API call. What is left is a call whose
failure botocore cannot see (Slack's webhook, DynamoDB's unprocessed batch items, a
throttled page of a paginated read) or a write worth one more try. Each caller says
how many attempts, which errors are worth another, and how long to wait before it;
the waiting is injected, so tests run without a clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: ``(error, attempt from 0) -> seconds to wait before the next attempt``, or None:
#: the error is not worth another attempt.
Delay = Callable[[Exception, int], "float | None"]


def exponential(base_s: float, cap_s: float = float("inf")) -> Callable[[int], float]:
    """``base_s``, doubled at each attempt (from 0), at most ``cap_s``."""
    return lambda attempt: min(base_s * 2**attempt, cap_s)


def retrying(
    call: Callable[[], T],
    *,
    attempts: int,
    delay: Delay,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, tried again after ``delay`` while it raises an error worth another
    attempt; the last error (or one not worth retrying) is raised as it is."""
    for attempt in range(attempts):
        try:
            return call()
        except Exception as exc:
            wait = delay(exc, attempt)
            if wait is None or attempt == attempts - 1:
                raise
            sleep(wait)
    raise ValueError(f"attempts must be at least 1, not {attempts}")
