"""One contract over both directory stores: a loaded directory holds what was written,
updates are compare-and-set (racing consumers lose nothing, stale decisions are redone),
and a late or duplicate observation changes nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.adapters.directory import DIRECTORY_ACTIONS, DynamoDbDirectory, InMemoryDirectory
from costguard.domain.directory import (
    AccountListing,
    SliceState,
    after_probe,
    after_regions,
    after_regions_failure,
    after_scan,
)
from costguard.domain.org import Slice
from tests.support.atomic import AtomicCalls

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TICK = timedelta(minutes=15)
A, B = "222222222222", "333333333333"
S = Slice(A, "us-east-1")


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryDirectory()
        return
    import boto3
    from moto import mock_aws

    from costguard_demo.plumbing import create_ledger_table

    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        client = AtomicCalls(session.client("dynamodb", region_name="us-east-1"))
        yield DynamoDbDirectory(client, "ledger", "111111111111")


def test_an_empty_directory_loads_empty(store: Any) -> None:
    d = store.load()
    assert d.listing is None and dict(d.regions) == {} and dict(d.slices) == {}
    assert d.status(S).state is SliceState.UNPROBED


def test_loads_what_was_written(store: Any) -> None:
    # GIVEN a listing, an account's regions and two slice states
    listing = AccountListing(
        (A, B), T0, "discover", ("444444444444",), (), {B: "yes"}, {A: "Throttling: é"}
    )
    store.save_listing(listing)
    store.update_regions(A, lambda e: after_regions(e, T0, ["us-east-1", "eu-west-1"]))
    store.update_slice(S, lambda st: after_probe(st, T0, True))
    other = Slice(A, "eu-west-1")
    store.update_slice(other, lambda st: after_probe(st, T0, False))
    # WHEN it is loaded
    d = store.load()
    # THEN every item comes back as written
    assert d.listing == listing
    assert d.regions[A].regions == ("eu-west-1", "us-east-1")
    assert d.regions[A].discovered_at == T0 and d.regions[A].version == 1
    assert d.slices[S].state is SliceState.ACTIVE and d.slices[S].as_of == T0
    assert d.slices[other].state is SliceState.EMPTY and d.slices[other].checked_at == T0


def test_a_listing_of_an_organization_of_50000_accounts_fits_one_item(store: Any) -> None:
    # An item holds at most 400 KB: as a plain list, 50,000 ids are about 850 KB.
    accounts = tuple(f"{n:012d}" for n in range(100_000_000_000, 100_000_050_000))
    opted_out = tuple(f"{n:012d}" for n in range(200_000_000_000, 200_000_001_000))
    store.save_listing(AccountListing(accounts, T0, "discover", opted_out))
    listing = store.load().listing
    assert listing.accounts == accounts and listing.opted_out == opted_out


def test_an_older_listing_never_replaces_a_newer_one(store: Any) -> None:
    store.save_listing(AccountListing((A, B), T0 + TICK, "discover"))
    store.save_listing(AccountListing((A,), T0, "discover"))
    listing = store.load().listing
    assert listing.accounts == (A, B) and listing.refreshed_at == T0 + TICK


def test_nothing_is_written_when_nothing_changes(store: Any) -> None:
    store.update_slice(S, lambda st: after_probe(st, T0, True))
    # a scan that still finds resources, then a late probe
    assert store.update_slice(S, lambda st: after_scan(st, T0 + TICK, 4, True)) is None
    assert store.update_slice(S, lambda st: after_probe(st, T0 - TICK, False)) is None
    assert store.load().slices[S].version == 1


def test_racing_observations_end_on_the_newest_whatever_the_order(store: Any) -> None:
    # GIVEN a stored slice, and eight consumers, each with a probe answer of another time
    # (the newest: found)
    store.update_slice(S, lambda st: after_probe(st, T0 - TICK, False))
    start = threading.Barrier(8)
    answers = [(T0 + n * TICK, n == 7) for n in range(8)]

    def observe(at: datetime, found: bool) -> None:
        def decide(st: Any) -> Any:
            time.sleep(0.02)  # every consumer decides on the value it read, then writes
            return after_probe(st, at, found)

        start.wait()
        store.update_slice(S, decide)

    # WHEN they write at once
    threads = [threading.Thread(target=observe, args=a) for a in answers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN the stored state is the newest answer, whichever thread wrote last
    status = store.load().slices[S]
    assert status.as_of == T0 + 7 * TICK and status.state is SliceState.ACTIVE
    assert 2 <= status.version <= 9


def test_a_failure_is_not_written_over_a_newer_success(store: Any) -> None:
    store.update_regions(A, lambda e: after_regions(e, T0 + TICK, ["us-east-1"]))
    assert store.update_regions(A, lambda e: after_regions_failure(e, T0, "late")) is None
    entry = store.load().regions[A]
    assert entry.failed_at is None and entry.regions == ("us-east-1",)


def test_refuses_a_malformed_account_before_writing(store: Any) -> None:
    with pytest.raises(ValueError, match="12-digit"):
        store.update_regions("12345", lambda e: after_regions(e, T0, []))


def test_the_store_calls_only_what_the_ledger_grant_holds() -> None:
    from costguard.adapters import directory
    from costguard.iam import LEDGER_ACTIONS
    from tests.infra.test_permissions import ledger_iam_actions

    needed = ledger_iam_actions(directory)
    assert needed == set(DIRECTORY_ACTIONS)
    assert set(DIRECTORY_ACTIONS) <= set(LEDGER_ACTIONS)


def test_the_listing_alone_reads_as_the_whole_directory_does(store: Any) -> None:
    from costguard.domain.directory import AccountListing

    assert store.listing() is None
    listing = AccountListing(
        ("222222222222", "333333333333"),
        datetime(2026, 11, 20, 12, 0, tzinfo=UTC),
        "discover",
        untagged={"333333333333": "TooManyRequestsException: slow down"},
    )
    store.save_listing(listing)
    assert store.listing() == store.load().listing
    assert store.listing().untagged == {"333333333333": "TooManyRequestsException: slow down"}
