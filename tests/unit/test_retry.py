"""The one retry policy: attempts, which errors retry, and the waits between them."""

from __future__ import annotations

import pytest

from costguard.retry import exponential, retrying


class Flaky(Exception):
    pass


def failing(times: int, error: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "ok"

    return calls, call


def test_a_retryable_error_is_tried_again_after_its_wait_until_the_call_succeeds() -> None:
    calls, call = failing(2, Flaky())
    waits: list[float] = []
    backoff = exponential(0.5)
    out = retrying(call, attempts=3, delay=lambda e, n: backoff(n), sleep=waits.append)  # type: ignore[arg-type]
    assert out == "ok" and len(calls) == 3 and waits == [0.5, 1.0]


def test_the_last_error_is_raised_after_the_last_attempt_without_a_wait_after_it() -> None:
    calls, call = failing(5, Flaky())
    waits: list[float] = []
    with pytest.raises(Flaky):
        retrying(call, attempts=3, delay=lambda e, n: 1.0, sleep=waits.append)  # type: ignore[arg-type]
    assert len(calls) == 3 and waits == [1.0, 1.0]


def test_an_error_not_worth_retrying_is_raised_at_once() -> None:
    calls, call = failing(1, KeyError("x"))
    waits: list[float] = []
    with pytest.raises(KeyError):
        retrying(
            call,  # type: ignore[arg-type]
            attempts=3,
            delay=lambda e, n: 1.0 if isinstance(e, Flaky) else None,
            sleep=waits.append,
        )
    assert len(calls) == 1 and waits == []


def test_exponential_backoff_doubles_and_stops_at_its_cap() -> None:
    backoff = exponential(0.05, 2.0)
    assert [backoff(n) for n in range(8)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_dynamodb_leftovers_are_sent_again_with_backoff_then_refused() -> None:
    from costguard.adapters.dynamodb import LedgerError, _until_processed

    sent: list[dict[str, object]] = []
    waits: list[float] = []

    def send(pending: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
        sent.append(pending)
        return {"n": len(sent)}, ({"t": ["x"]} if len(sent) < 3 else {})

    answers = _until_processed(send, {"t": ["x", "y"]}, "writes", sleep=waits.append)
    assert answers == [{"n": 1}, {"n": 2}, {"n": 3}] and sent[1] == {"t": ["x"]}
    assert waits == [0.05, 0.1]
    with pytest.raises(LedgerError, match="left 1 writes unprocessed"):
        _until_processed(lambda p: ({}, {"t": ["x"]}), {"t": ["x"]}, "writes", sleep=waits.append)
