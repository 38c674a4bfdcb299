"""CloudTrail's event history: which volumes were attached since a time (``AttachVolume``).

EC2 keeps no attachment history (``DescribeVolumes`` shows an attachment only while it
lasts), so the stale-volume guard asks CloudTrail whether a volume was attached since its
backup snapshot began before deleting it. ``LookupEvents`` is free but limited to two
calls a second per account and region, and takes one lookup attribute: so one lookup per
region and run, filtered by ``EventName=AttachVolume`` over a time window, serves every
volume of that region (pages of 50 events); never one lookup per volume.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from costguard.adapters.aws import reading
from costguard.domain.stale_volumes import PROOF_LOOKBACK, AttachRecord
from costguard.iam import Permission
from costguard.ports import SourceError

#: LookupEvents returns at most 50 events a page.
PAGE = 50
#: Pages read per region and run (2,000 events, about 20 s at two calls a second): past
#: it the history is incomplete, and a volume it cannot clear is snapshotted again.
MAX_PAGES = 40
EVENT_NAME = "AttachVolume"

READS = (
    Permission(
        ("cloudtrail:LookupEvents",),
        "prove that no instance attached a stale volume (and so wrote to it) since its backup "
        "snapshot began: AttachVolume events, one lookup per region and run; LookupEvents "
        "has no resource-level permissions",
    ),
)


class CloudTrailClients(Protocol):
    def cloudtrail(self, region: str) -> Any: ...


@dataclass
class _Window:
    """What one run read of one region's ``AttachVolume`` events."""

    #: Every AttachVolume from here to the present was read (None: nothing read yet).
    start: datetime | None = None
    #: False once a read was cut short by the page budget: nothing more is proved.
    complete: bool = True
    pages: int = 0
    attached: dict[str, list[datetime]] = field(default_factory=dict)
    failure: SourceError | None = None


def as_utc(value: Any) -> datetime:
    """A time as boto3 or an event gives it (datetime, epoch seconds or ISO text), in UTC."""
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def attached_volumes(event: Any) -> set[str]:
    """The volume ids one ``AttachVolume`` event names: its resources, and the request's
    ``volumeId`` (either alone would do; both, so that neither shape is trusted blindly)."""
    found = {
        str(r["ResourceName"])
        for r in event.get("Resources") or []
        if r.get("ResourceType") == "AWS::EC2::Volume" and r.get("ResourceName")
    }
    try:
        record = json.loads(event.get("CloudTrailEvent") or "{}")
    except ValueError:
        record = {}
    params = record.get("requestParameters") if isinstance(record, dict) else None
    if isinstance(params, dict) and params.get("volumeId"):
        found.add(str(params["volumeId"]))
    return found


class CloudTrailAttachHistory:
    """:class:`costguard.ports.AttachHistory` on CloudTrail's ``LookupEvents``.

    Within one run (the ``run`` time asked with), a region is read once, from the first
    ``since`` asked about to the present; an earlier ``since`` extends the window
    backwards by at least the span already read (so a run makes a few lookups per region,
    however many volumes it asks about). A failed read fails every ask of that region in
    the run without calling again.
    """

    def __init__(self, clients: CloudTrailClients, *, max_pages: int = MAX_PAGES) -> None:
        self._clients = clients
        self._max_pages = max_pages
        self._run: datetime | None = None
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def attachments(
        self, region: str, volume_id: str, since: datetime, run: datetime
    ) -> AttachRecord:
        since = as_utc(since)
        with self._lock:
            if run != self._run:
                self._run, self._windows = run, {}
            w = self._windows.setdefault(region, _Window())
            if w.failure is not None:
                raise w.failure
            floor = run - PROOF_LOOKBACK
            wanted = max(since, floor)
            if w.complete and (w.start is None or wanted < w.start):
                if w.start is None:
                    self._read(region, w, wanted, None)
                else:
                    span = max(run - w.start, timedelta(hours=1))
                    self._read(region, w, max(floor, min(wanted, w.start - span)), w.start)
            seen = [t for t in w.attached.get(volume_id, ()) if t >= since]
            complete = w.complete and w.start is not None and w.start <= since
            return AttachRecord(since, complete, max(seen) if seen else None)

    def _read(self, region: str, w: _Window, start: datetime, end: datetime | None) -> None:
        kwargs: dict[str, Any] = {
            "LookupAttributes": [{"AttributeKey": "EventName", "AttributeValue": EVENT_NAME}],
            "StartTime": start,
            "PaginationConfig": {"PageSize": PAGE},
        }
        if end is not None:
            kwargs["EndTime"] = end
        try:
            with reading("cloudtrail", region, "LookupEvents"):
                pages = self._clients.cloudtrail(region).get_paginator("lookup_events")
                for page in pages.paginate(**kwargs):
                    w.pages += 1
                    for event in page.get("Events") or []:
                        if event.get("EventName", EVENT_NAME) != EVENT_NAME:
                            continue
                        at = as_utc(event["EventTime"])
                        for vid in attached_volumes(event):
                            w.attached.setdefault(vid, []).append(at)
                    if page.get("NextToken") and w.pages >= self._max_pages:
                        w.complete = False
                        return
        except SourceError as exc:
            w.failure = exc
            raise
        w.start = start
