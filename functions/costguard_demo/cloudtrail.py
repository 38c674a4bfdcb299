"""The embedded AWS's CloudTrail event history, for the one lookup CostGuard makes.

moto 5.2.5 does not implement ``cloudtrail:LookupEvents`` (it raises NotImplementedError)
and records no EC2 call as an event. The stale-volume guard deletes a volume only when
CloudTrail shows no ``AttachVolume`` of it since its backup snapshot began, so the demo
and the tests need that history. :func:`install` makes moto keep it:

- every ``AttachVolume`` call the embedded EC2 accepts is recorded, as CloudTrail records
  the API call (not the attachments ``RunInstances`` makes), on moto's EC2 backend of its
  account and region, so that moto's reset forgets it; stamped with moto's clock, which
  also stamps the snapshots it is compared with;
- ``LookupEvents`` answers from it, shaped as CloudTrail answers: the ``EventName`` and
  ``ResourceName`` lookup attributes, ``StartTime``/``EndTime`` (both inclusive), newest
  first, pages of ``MaxResults`` (1–50, default 50) with a ``NextToken``, and each event's
  ``Resources`` and ``CloudTrailEvent`` JSON.

Idempotent; in-process moto and ``ThreadedMotoServer`` alike (both dispatch to the same
response classes). Tests move an event in time with :func:`attach_events`.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

#: Where the events are kept on moto's EC2 backend object.
_ATTRIBUTE = "costguard_cloudtrail_attach_events"
_INSTALLED: list[bool] = []


def attach_events(account: str, region: str) -> list[dict[str, Any]]:
    """The recorded ``AttachVolume`` events of one account and region, oldest first
    (``at`` is an aware UTC datetime a test may move)."""
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account][region]
    events: list[dict[str, Any]] = backend.__dict__.setdefault(_ATTRIBUTE, [])
    return events


def install() -> None:
    """Make moto record ``AttachVolume`` calls and answer ``LookupEvents`` (idempotent)."""
    if _INSTALLED:
        return
    from moto.cloudtrail.responses import CloudTrailResponse
    from moto.core.utils import utcnow
    from moto.ec2.responses.elastic_block_store import ElasticBlockStore

    original = ElasticBlockStore.attach_volume

    def attach_volume(self: Any) -> Any:
        result = original(self)
        attach_events(self.current_account, self.region).append(
            {
                "id": str(uuid.uuid4()),
                # CloudTrail's eventTime is in whole seconds.
                "at": utcnow().replace(tzinfo=UTC, microsecond=0),
                "volume": self._get_param("VolumeId"),
                "instance": self._get_param("InstanceId"),
                "device": self._get_param("Device"),
                "region": self.region,
                "account": self.current_account,
            }
        )
        return result

    ElasticBlockStore.attach_volume = attach_volume  # type: ignore[method-assign]
    CloudTrailResponse.lookup_events = _lookup_events  # type: ignore[attr-defined]
    _INSTALLED.append(True)


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def _lookup_events(self: Any) -> str:
    from moto.core.exceptions import JsonRESTError

    attributes = self._get_param("LookupAttributes") or []
    if len(attributes) > 1:
        raise JsonRESTError(
            "InvalidLookupAttributesException", "You cannot specify more than one attribute."
        )
    limit = int(self._get_param("MaxResults") or 50)
    if not 1 <= limit <= 50:
        raise JsonRESTError("InvalidMaxResultsException", "MaxResults must be from 1 to 50.")
    start, end = _time(self._get_param("StartTime")), _time(self._get_param("EndTime"))
    events = list(reversed(attach_events(self.current_account, self.region)))  # newest first
    for attribute in attributes:
        key, value = attribute["AttributeKey"], attribute["AttributeValue"]
        if key == "EventName":
            events = [e for e in events if value == "AttachVolume"]
        elif key == "ResourceName":
            events = [e for e in events if value in (e["volume"], e["instance"])]
        elif key == "EventSource":
            events = [e for e in events if value == "ec2.amazonaws.com"]
        else:  # pragma: no cover - CostGuard asks by event name only
            raise NotImplementedError(f"LookupEvents by {key} is not modelled")
    events = [
        e for e in events if (start is None or e["at"] >= start) and (end is None or e["at"] <= end)
    ]
    offset = int(self._get_param("NextToken") or 0)
    page = events[offset : offset + limit]
    body: dict[str, Any] = {"Events": [_event(e) for e in page]}
    if offset + limit < len(events):
        body["NextToken"] = str(offset + limit)
    return json.dumps(body)


def _event(e: dict[str, Any]) -> dict[str, Any]:
    record = {
        "eventVersion": "1.09",
        "eventTime": e["at"].strftime("%Y-%m-%dT%H:%M:%SZ"),
        "eventSource": "ec2.amazonaws.com",
        "eventName": "AttachVolume",
        "awsRegion": e["region"],
        "requestParameters": {
            "volumeId": e["volume"],
            "instanceId": e["instance"],
            "device": e["device"],
            "deleteOnTermination": False,
        },
        "responseElements": {
            "volumeId": e["volume"],
            "instanceId": e["instance"],
            "device": e["device"],
            "status": "attaching",
        },
        "eventID": e["id"],
        "readOnly": False,
        "eventType": "AwsApiCall",
        "managementEvent": True,
        "recipientAccountId": e["account"],
    }
    return {
        "EventId": e["id"],
        "EventName": "AttachVolume",
        "ReadOnly": "false",
        "EventTime": e["at"].timestamp(),
        "EventSource": "ec2.amazonaws.com",
        "Username": "owner",
        "Resources": [
            {"ResourceType": "AWS::EC2::Volume", "ResourceName": e["volume"]},
            {"ResourceType": "AWS::EC2::Instance", "ResourceName": e["instance"]},
        ],
        "CloudTrailEvent": json.dumps(record),
    }
