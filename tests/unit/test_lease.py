"""The one lease rule (domain/lease.py), at its edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.domain.lease import DONE, PENDING, RELEASED, Lease, claim

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
M = timedelta(minutes=15)


def test_a_pending_claim_is_held_until_its_expiry_and_free_at_it() -> None:
    held = claim(None, T, M)
    assert held == Lease(PENDING, T, T + M)
    assert claim(held, T + M - timedelta(microseconds=1), M) is None
    assert claim(held, T + M, M) == Lease(PENDING, T + M, T + 2 * M)


def test_a_stale_now_is_refused_only_where_time_is_kept_in_order() -> None:
    released = Lease(RELEASED, T)
    assert claim(released, T - M, M) is None
    assert claim(released, T - M, M, monotonic=False) == Lease(PENDING, T - M, T)


def test_only_the_holder_releases_and_only_a_pending_claim() -> None:
    held = Lease(PENDING, T, T + M)
    assert held.released_by(T - M) is None
    assert held.released_by(T) == Lease(RELEASED, T, T + M)
    assert Lease(DONE, T).released_by(T) is None


def test_done_stays_done_unless_reopened_for_its_own_fence_and_not_the_kept_one() -> None:
    done = Lease(DONE, T, fence="warn/1")
    assert claim(done, T + M, M) is None
    assert done.reopened("warn") is not None and done.reopened("warn/1") is not None
    assert done.reopened("warn/10") is None and done.reopened("warn", keep="warn/1") is None
    assert Lease(DONE, T).reopened("warn") is None  # a put-once record has no fence
