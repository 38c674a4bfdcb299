"""The guard fan-out's plan and the act queue's messages, on fakes (no AWS).

Each test is GIVEN/WHEN/THEN; the docstring names what a user loses in production.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from costguard.adapters.directory import InMemoryDirectory
from costguard.adapters.work_queue import GuardItem
from costguard.domain.directory import AccountListing, AccountRegions
from costguard.domain.org_act import GuardRun, Reach
from costguard.services.org_act import GuardFanout, GuardFanoutSettings

T = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
A, B = "222222222222", "333333333333"


class Sent:
    def __init__(self) -> None:
        self.runs: list[GuardRun] = []

    def send(self, runs: Sequence[GuardRun]) -> int:
        self.runs.extend(runs)
        return len(runs)


def test_a_guard_never_acts_in_an_account_whose_opt_out_tag_could_not_be_read() -> None:
    """The daily listing keeps an account whose tags it could not read (throttled
    ListTagsForResource) and guards it, because "a scan is read-only". A guard is not: on
    the first listing, an account tagged costguard:opt-out=true whose tags were unreadable
    gets its volumes deleted and its notebooks stopped."""
    # GIVEN the first listing of the Organization: B's tags could not be read
    store = InMemoryDirectory()
    store.save_listing(
        AccountListing(
            (A, B),
            T,
            "discover",
            untagged={B: "TooManyRequestsException: rate exceeded"},
        )
    )
    for account in (A, B):
        store.update_regions(account, lambda r: AccountRegions(r.account, ("us-east-1",), T))
    queue = Sent()
    fanout = GuardFanout(store, queue, GuardFanoutSettings(reaches={"stale-volumes": Reach.DATA}))
    # WHEN the stale-volume guard's schedule fans out
    fanout.tick("stale-volumes", T)
    # THEN A is guarded, and B, whose opt-out is unknown, is not acted in
    assert [r.account for r in queue.runs] == [A]


@pytest.mark.parametrize("hostile", ["../", "US-EAST-1", "us-east-1\u200b", "x" * 60])
def test_a_guard_message_naming_a_malformed_region_is_refused_at_the_boundary(
    hostile: str,
) -> None:
    """Only the first region of a guard message is checked (GuardRun checks regions[0]):
    a later malformed one goes into the guard's settings unchecked and fails the whole run
    after its good regions were read, with botocore's InvalidRegionError or, for a long
    name, a bare KeyError, on every retry until the dead-letter queue (an upper-case one
    even runs, as a region of its own). Bad input must be a clear error at the boundary."""
    body = GuardItem.model_construct(
        time=T, guard="stale-volumes", account=A, regions=("us-east-1", hostile)
    ).model_dump_json()
    with pytest.raises(ValueError, match="region"):
        GuardItem.model_validate_json(body).run()
