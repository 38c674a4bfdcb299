"""The ends of a time window, decided in one place (domain/windows.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.domain.windows import before, between, held, within

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
S = timedelta(microseconds=1)
H = timedelta(hours=1)


def test_a_window_holds_its_start_and_not_its_end() -> None:
    assert within(T, T, T + H)
    assert within(T + H - S, T, T + H)
    assert not within(T + H, T, T + H)
    assert not within(T - S, T, T + H)


def test_windows_that_meet_never_both_hold_one_instant() -> None:
    assert [within(T + H, T, T + H), within(T + H, T + H, T + 2 * H)] == [False, True]


def test_between_holds_both_ends() -> None:
    assert between(T, T, T + H) and between(T + H, T, T + H)
    assert not between(T - S, T, T + H) and not between(T + H + S, T, T + H)


def test_before_an_end_is_over_at_the_end_and_never_over_without_one() -> None:
    assert before(T - S, T)
    assert not before(T, T)
    assert before(T + 1000 * H, None)


def test_a_hold_runs_until_its_end_exclusive_and_no_end_is_no_hold() -> None:
    assert held(T - S, T)
    assert not held(T, T)  # a lease is free again at its expiry
    assert not held(T, None)
