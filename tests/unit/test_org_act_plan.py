"""Which member accounts a guard run covers, and where: pure, from the directory alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from costguard.adapters.work_queue import GuardItem
from costguard.domain.directory import AccountRegions, Directory, SliceState, SliceStatus
from costguard.domain.org import Slice
from costguard.domain.org_act import (
    GuardRun,
    Reach,
    act_unreachable_alert,
    guard_scope,
    plan_guard_runs,
)

T = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
A, B, C = "222222222222", "333333333333", "444444444444"


def directory() -> Directory:
    regions = {
        A: AccountRegions(A, ("us-east-1", "us-west-2", "eu-west-1"), T),
        B: AccountRegions(B, ("us-east-1",), T),
        # C's regions could not be read: nothing is known of it yet
        C: AccountRegions(C, (), None, T, "AccessDenied"),
    }
    slices = {
        Slice(A, "us-east-1"): SliceStatus(Slice(A, "us-east-1"), SliceState.ACTIVE, T),
        Slice(A, "us-west-2"): SliceStatus(Slice(A, "us-west-2"), SliceState.EMPTY, T),
        Slice(A, "eu-west-1"): SliceStatus(Slice(A, "eu-west-1"), SliceState.ACTIVE, T),
        Slice(B, "us-east-1"): SliceStatus(Slice(B, "us-east-1"), SliceState.UNPROBED),
    }
    return Directory(None, regions, slices)


def test_a_compute_guard_runs_only_where_compute_was_found() -> None:
    runs = plan_guard_runs(directory(), [A, B, C], T, "idle-notebooks", Reach.COMPUTE)
    assert runs == [GuardRun(T, "idle-notebooks", A, ("eu-west-1", "us-east-1"))]


def test_a_data_guard_runs_in_every_allowed_region_of_every_account_with_regions() -> None:
    allow = frozenset({"us-east-1", "us-west-2"})
    runs = plan_guard_runs(directory(), [A, B, C], T, "stale-volumes", Reach.DATA, allow)
    assert runs == [
        GuardRun(T, "stale-volumes", A, ("us-east-1", "us-west-2")),
        GuardRun(T, "stale-volumes", B, ("us-east-1",)),
    ]
    everywhere = plan_guard_runs(directory(), [A], T, "stale-volumes", Reach.DATA)
    assert everywhere[0].regions == ("eu-west-1", "us-east-1", "us-west-2")


def test_an_account_listed_twice_runs_once_and_an_unknown_account_not_at_all() -> None:
    runs = plan_guard_runs(directory(), [A, A, "555555555555"], T, "g", Reach.DATA)
    assert [r.account for r in runs] == [A]


def test_an_allow_list_that_excludes_everything_plans_nothing() -> None:
    assert plan_guard_runs(directory(), [A, B], T, "g", Reach.DATA, frozenset()) == []


def test_a_run_refuses_a_local_time_a_bad_account_and_no_region() -> None:
    with pytest.raises(ValueError, match=r"UTC|timezone"):
        GuardRun(datetime(2026, 11, 20, 12), "g", A, ("us-east-1",))  # noqa: DTZ001
    with pytest.raises(ValueError):
        GuardRun(T, "g", "12345", ("us-east-1",))
    with pytest.raises(ValueError, match="no region"):
        GuardRun(T, "g", A, ())


def test_each_account_has_its_own_ledger_scope_apart_from_its_slices() -> None:
    assert guard_scope("111111111111", A) == f"111111111111/{A}"
    assert guard_scope("111111111111", A) != guard_scope("111111111111", B)
    assert guard_scope("111111111111", A) != f"111111111111/{A}/us-east-1"


def test_a_queue_message_round_trips_and_is_deduplicated_per_time_account_and_guard() -> None:
    run = GuardRun(T, "stale-objects", A, ("us-east-1",))
    item = GuardItem.model_validate_json(GuardItem.of(run).model_dump_json())
    assert item.run() == run
    other_guard = GuardItem.of(GuardRun(T, "idle-notebooks", A, ("us-east-1",)))
    later = GuardItem.of(GuardRun(T + timedelta(hours=1), "stale-objects", A, ("us-east-1",)))
    assert len({item.dedupe_id(), other_guard.dedupe_id(), later.dedupe_id()}) == 3


@pytest.mark.parametrize(
    "body",
    [
        '{"time": "2026-11-20T12:00:00Z", "guard": "x", "account": "222222222222", "regions": []}',
        '{"time": "2026-11-20T12:00:00Z", "guard": "../x", "account": "222222222222", '
        '"regions": ["us-east-1"]}',
        '{"time": "2026-11-20T12:00:00Z", "guard": "x", "account": "222222222222", '
        '"regions": ["us-east-1"], "dryRun": false}',
        '{"time": "2026-11-20T12:00:00", "guard": "x", "account": "222222222222", '
        '"regions": ["us-east-1"]}',
    ],
)
def test_a_malformed_message_is_refused_not_guessed(body: str) -> None:
    with pytest.raises((ValidationError, ValueError)):
        GuardItem.model_validate_json(body).run()


def test_the_unreachable_alert_is_claimed_once_per_account_and_day_whatever_the_guard() -> None:
    one = act_unreachable_alert(
        GuardRun(T, "idle-notebooks", C, ("us-east-1",)), "AccessDenied", "no", T
    )
    two = act_unreachable_alert(
        GuardRun(T + timedelta(hours=3), "stale-objects", C, ("us-east-1",)),
        "Throttling",
        "x",
        T + timedelta(hours=3),
    )
    next_day = act_unreachable_alert(
        GuardRun(T, "stale-objects", C, ("us-east-1",)), "AccessDenied", "no", T + timedelta(days=1)
    )
    assert one.dedupe == two.dedupe != next_day.dedupe
    assert C in one.title and "costguard-member-act" in " ".join(one.next_steps)


@pytest.mark.parametrize(
    ("tick", "inside"),
    [
        ("2026-11-20T08:59:59+00:00", False),
        ("2026-11-20T09:00:00+00:00", True),
        ("2026-11-20T09:45:00+00:00", True),
        ("2026-11-20T10:00:00+00:00", False),
        ("2026-11-21T09:15:00+00:00", True),
    ],
)
def test_only_the_digest_hour_s_times_keep_advice(tick: str, inside: bool) -> None:
    from costguard.domain.org import in_digest_window

    assert in_digest_window(datetime.fromisoformat(tick), 9, timedelta(minutes=15)) is inside
