"""CloudTrail's AttachVolume history (the stale-volume guard's proof) on botocore's Stubber.

moto implements no ``LookupEvents``: these tests give the adapter real-shaped answers
(events as CloudTrail returns them: ``Resources`` and the ``CloudTrailEvent`` record) and
check what it asks, how often, and what it concludes. The guard on moto, with the
embedded event history, is in tests/functional/test_stale_volumes.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.adapters.cloudtrail import MAX_PAGES, PAGE, CloudTrailAttachHistory
from costguard.domain.stale_volumes import PROOF_LOOKBACK, AttachRecord
from costguard.ports import AccessDeniedError

REGION = "us-east-1"
RUN = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
BY_NAME = [{"AttributeKey": "EventName", "AttributeValue": "AttachVolume"}]


def event(volume: str, at: datetime, *, resources: bool = True) -> dict[str, Any]:
    """One AttachVolume event as LookupEvents returns it."""
    record = {
        "eventVersion": "1.09",
        "eventTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "eventSource": "ec2.amazonaws.com",
        "eventName": "AttachVolume",
        "awsRegion": REGION,
        "requestParameters": {
            "volumeId": volume,
            "instanceId": "i-0123456789abcdef0",
            "device": "/dev/sdf",
            "deleteOnTermination": False,
        },
        "responseElements": {"volumeId": volume, "status": "attaching"},
    }
    return {
        "EventId": f"e-{volume}-{at:%H%M%S}",
        "EventName": "AttachVolume",
        "ReadOnly": "false",
        "EventTime": at,
        "EventSource": "ec2.amazonaws.com",
        "Username": "alice",
        "Resources": [
            {"ResourceType": "AWS::EC2::Volume", "ResourceName": volume},
            {"ResourceType": "AWS::EC2::Instance", "ResourceName": "i-0123456789abcdef0"},
        ]
        if resources
        else [],
        "CloudTrailEvent": json.dumps(record),
    }


class Clients:
    """The adapter's clients: one stubbed CloudTrail client per region."""

    def __init__(self) -> None:
        self.client = boto3.client("cloudtrail", region_name=REGION)
        self.stub = Stubber(self.client)

    def cloudtrail(self, region: str) -> Any:
        assert region == REGION
        return self.client

    def expect(
        self,
        events: list[dict[str, Any]],
        start: datetime,
        end: datetime | None = None,
        *,
        token: str | None = None,
        next_token: str | None = None,
    ) -> None:
        params: dict[str, Any] = {
            "LookupAttributes": BY_NAME,
            "StartTime": start,
            "MaxResults": PAGE,
        }
        if end is not None:
            params["EndTime"] = end
        if token is not None:
            params["NextToken"] = token
        body: dict[str, Any] = {"Events": events}
        if next_token is not None:
            body["NextToken"] = next_token
        self.stub.add_response("lookup_events", body, params)


@pytest.fixture
def clients() -> Any:
    c = Clients()
    with c.stub:
        yield c
        c.stub.assert_no_pending_responses()


def test_one_lookup_serves_every_volume_of_a_region_in_a_run(clients: Clients) -> None:
    """GIVEN CloudTrail holding an AttachVolume of vol-b only
    WHEN one run asks about three volumes, since times no earlier than the first asked
    THEN one LookupEvents call (by event name, from the first since) answers all three."""
    since = RUN - 2 * H
    clients.expect([event("vol-b", RUN - H)], since)
    history = CloudTrailAttachHistory(clients)
    assert history.attachments(REGION, "vol-a", since, RUN) == AttachRecord(since, True)
    assert history.attachments(REGION, "vol-b", since, RUN) == AttachRecord(since, True, RUN - H)
    later = RUN - 30 * timedelta(minutes=1)
    assert history.attachments(REGION, "vol-b", later, RUN) == AttachRecord(later, True)


def test_pages_are_followed_and_a_volume_named_only_in_its_record_counts(
    clients: Clients,
) -> None:
    since = RUN - 3 * H
    clients.expect([event("vol-x", RUN - H)], since, next_token="t1")
    clients.expect([event("vol-a", RUN - 2 * H, resources=False)], since, token="t1")
    record = CloudTrailAttachHistory(clients).attachments(REGION, "vol-a", since, RUN)
    assert record == AttachRecord(since, True, RUN - 2 * H)


def test_an_earlier_since_extends_the_window_backwards_once(clients: Clients) -> None:
    """GIVEN a run that read the last hour of a region
    WHEN it asks about a volume whose backup began five hours ago
    THEN it reads only what it has not read, ending where the first read began, and
    at least as far back again (so that asks from ever earlier backups do not each cost
    a call)."""
    first = RUN - H
    clients.expect([], first)
    clients.expect([event("vol-old", RUN - 4 * H)], RUN - 5 * H, first)
    history = CloudTrailAttachHistory(clients)
    history.attachments(REGION, "vol-new", first, RUN)
    assert history.attachments(REGION, "vol-old", RUN - 5 * H, RUN) == AttachRecord(
        RUN - 5 * H, True, RUN - 4 * H
    )
    # ... and an ask a little earlier than the first, but later than what was read since,
    # costs nothing
    assert history.attachments(REGION, "vol-x", RUN - 2 * H, RUN).complete


def test_a_page_budget_leaves_the_history_incomplete_but_keeps_what_it_saw(
    clients: Clients,
) -> None:
    """GIVEN more AttachVolume events since the backup than the run may read
    THEN nothing is proved (incomplete), an attachment seen still counts, and the run
    stops calling."""
    since = RUN - 3 * H
    for n in range(MAX_PAGES):
        clients.expect(
            [event("vol-busy", RUN - H)] if n == 0 else [],
            since,
            token=None if n == 0 else f"t{n}",
            next_token=f"t{n + 1}",
        )
    history = CloudTrailAttachHistory(clients)
    assert history.attachments(REGION, "vol-a", since, RUN) == AttachRecord(since, False)
    assert history.attachments(REGION, "vol-busy", since, RUN) == AttachRecord(
        since, False, RUN - H
    )


def test_a_new_run_reads_again(clients: Clients) -> None:
    """GIVEN a run that found no attachment of vol-a
    WHEN the next run asks (the owner may have attached it in between)
    THEN it reads CloudTrail again, and sees the attachment."""
    since = RUN - 2 * H
    clients.expect([], since)
    clients.expect([event("vol-a", RUN + 10 * timedelta(minutes=1))], since)
    history = CloudTrailAttachHistory(clients)
    assert history.attachments(REGION, "vol-a", since, RUN).last_attach is None
    later = RUN + 30 * timedelta(minutes=1)
    assert history.attachments(REGION, "vol-a", since, later).last_attach == (
        RUN + 10 * timedelta(minutes=1)
    )


def test_a_refused_lookup_fails_every_ask_of_the_region_in_the_run_with_one_call(
    clients: Clients,
) -> None:
    clients.stub.add_client_error(
        "lookup_events", "AccessDeniedException", "not authorized to perform LookupEvents"
    )
    history = CloudTrailAttachHistory(clients)
    for volume in ("vol-a", "vol-b"):
        with pytest.raises(AccessDeniedError, match="LookupEvents"):
            history.attachments(REGION, volume, RUN - H, RUN)


def test_a_backup_older_than_the_lookback_is_not_proved(clients: Clients) -> None:
    """GIVEN a backup that began before the lookback (CloudTrail would be read for weeks)
    THEN the history is read only back to the lookback, and proves nothing about it."""
    floor = RUN - PROOF_LOOKBACK
    clients.expect([], floor)
    record = CloudTrailAttachHistory(clients).attachments(
        REGION, "vol-a", floor - timedelta(days=1), RUN
    )
    assert record.complete is False
