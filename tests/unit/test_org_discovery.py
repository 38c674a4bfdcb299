"""Discovering the Organization's accounts: one account's unreadable tags fail nothing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from costguard.adapters.directory import InMemoryDirectory
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.slices import InMemorySliceBook
from costguard.domain.directory import AccountListing, DiscoveryError, TickPolicy, WorkKind
from costguard.services.fanout import TAG_ATTEMPTS, Fanout, FanoutSettings
from tests.support.org_fakes import RecordingQueue

HUB = "999999999999"
A, B, C, D = "111111111111", "222222222222", "333333333333", "444444444444"
T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
OPT_OUT = {"costguard:opt-out": "true"}


class _Source:
    """Organizations whose ListTagsForResource fails ``failures[account]`` times with
    ``code`` for that account (after the SDK's retries), then answers ``tags``."""

    def __init__(
        self,
        accounts: list[str],
        tags: Mapping[str, Mapping[str, str]],
        failures: Mapping[str, int],
        code: str = "TooManyRequestsException",
    ) -> None:
        self._accounts = accounts
        self._tags = tags
        self.left = dict(failures)
        self.code = code
        self.calls: Counter[str] = Counter()

    def accounts(self) -> list[tuple[str, str]]:
        return [(a, "ACTIVE") for a in self._accounts]

    def tags(self, account: str) -> Mapping[str, str]:
        self.calls[account] += 1
        if self.left.get(account, 0) > 0:
            self.left[account] -= 1
            raise DiscoveryError(self.code, "ListTagsForResource: Rate exceeded")
        return self._tags.get(account, {})


def _fanout(
    source: _Source, store: InMemoryDirectory, sleeps: list[float], ledger: InMemoryLedger
) -> Fanout:
    return Fanout(
        store,
        InMemorySliceBook(),
        RecordingQueue(Counter()),
        FanoutSettings(HUB, TickPolicy(timedelta(hours=6), "us-east-1"), timedelta(minutes=10)),
        source=source,
        findings=ledger,
        sleep=sleeps.append,
    )


def test_a_throttled_accounts_tags_are_tried_again_with_backoff() -> None:
    # GIVEN Organizations throttling B's tags twice (past the SDK's retries), B opted out
    source = _Source([A, B], {B: OPT_OUT}, {B: TAG_ATTEMPTS - 1})
    sleeps: list[float] = []
    # WHEN the hub lists the Organization
    summary = _fanout(source, InMemoryDirectory(), sleeps, InMemoryLedger()).tick(T0)
    # THEN B's opt-out is read on the third try, after pauses of 0.5 s and 1 s
    assert source.calls[B] == TAG_ATTEMPTS and sleeps == [0.5, 1.0]
    assert summary.accounts == 1 and summary.untagged == ()


def test_an_account_whose_tags_cannot_be_read_keeps_its_last_decision_and_is_reported() -> None:
    # GIVEN yesterday's listing: A and B guarded, C opted out; D joined since
    store = InMemoryDirectory()
    store.save_listing(AccountListing((A, B), T0 - timedelta(days=1), "discover", opted_out=(C,)))
    # AND today every ListTagsForResource but A's is refused
    source = _Source([A, B, C, D], {C: OPT_OUT}, {B: 9, C: 9, D: 9}, "AccessDeniedException")
    sleeps: list[float] = []
    ledger = InMemoryLedger()
    # WHEN the daily refresh runs
    summary = _fanout(source, store, sleeps, ledger).tick(T0)
    # THEN the refresh succeeds: B stays guarded, C stays out, the new D is guarded
    listing = store.load().listing
    assert listing is not None and listing.refreshed_at == T0
    assert listing.accounts == (A, B, D) and listing.opted_out == (C,)
    assert set(listing.untagged) == {B, C, D}
    assert summary.discovery_error is None and summary.untagged == (B, C, D)
    regions = {w.slice.account for w in summary.work.items() if w.kind is WorkKind.REGIONS}
    assert regions == {A, B, D}
    # AND a refusal is not tried again (only throttling is)
    assert sleeps == [] and source.calls[B] == 1
    # AND each account is named in a finding that says what was decided
    found = {f.resource: f.message for f in ledger.findings(HUB, "2026-11-20")}
    assert "guarded" in found[f"account/{B}/tags"]
    assert "opted out" in found[f"account/{C}/tags"]
    assert "AccessDeniedException" in found[f"account/{D}/tags"]
