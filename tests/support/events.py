"""Recorded-shape EventBridge events, as delivered to a Lambda target (test-only).

The samples live in ``tests/fixtures/events/``; their README says where each shape comes
from. :func:`load_event` returns a fresh copy of one, with the overrides a test needs, and
keeps the copy self-consistent: a new account or region is rewritten in every ARN, account
id and availability zone of the event, and a new resource id lands in every field that
names the resource (the detail field, its ARN and ``resources[]``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

EVENTS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "events"

#: Every sample, by name (file name without ``.json``).
SAMPLES = (
    "ec2-instance-state-pending",
    "ec2-instance-state-running",
    "ec2-instance-state-stopped",
    "sagemaker-notebook-inservice",
    "sagemaker-training-inprogress",
    "sagemaker-endpoint-inservice",
    "cloudtrail-runinstances",
)

#: The top-level keys EventBridge puts on every event it delivers.
ENVELOPE_KEYS = frozenset(
    {"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"}
)

Event = dict[str, Any]


@cache
def _read(name: str) -> Event:
    data: Event = json.loads((EVENTS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    return data


def _ec2_instance(event: Event, resource_id: str) -> None:
    event["detail"]["instance-id"] = resource_id
    event["resources"] = [
        _arn_with_resource(arn, f"instance/{resource_id}") for arn in event["resources"]
    ]


def _sagemaker(
    name_field: str, arn_field: str, kind: str, lowercase_arn: bool
) -> Callable[[Event, str], None]:
    # SageMaker lowercases notebook-instance and endpoint names in their ARNs (the recorded
    # notebook event and the documented endpoint event both show it); the documented training
    # job event does not, so its ARN keeps the name as given.
    def apply(event: Event, resource_id: str) -> None:
        in_arn = resource_id.lower() if lowercase_arn else resource_id
        detail = event["detail"]
        detail[name_field] = resource_id
        detail[arn_field] = _arn_with_resource(detail[arn_field], f"{kind}/{in_arn}")
        event["resources"] = [
            _arn_with_resource(arn, f"{kind}/{in_arn}") for arn in event["resources"]
        ]

    return apply


def _runinstances(event: Event, resource_id: str) -> None:
    # CloudTrail events carry no resource ARNs (resources is []): the id is in the response.
    event["detail"]["responseElements"]["instancesSet"]["items"][0]["instanceId"] = resource_id


_RESOURCE_ID: dict[str, Callable[[Event, str], None]] = {
    "ec2-instance-state-pending": _ec2_instance,
    "ec2-instance-state-running": _ec2_instance,
    "ec2-instance-state-stopped": _ec2_instance,
    "sagemaker-notebook-inservice": _sagemaker(
        "NotebookInstanceName", "NotebookInstanceArn", "notebook-instance", lowercase_arn=True
    ),
    "sagemaker-training-inprogress": _sagemaker(
        "TrainingJobName", "TrainingJobArn", "training-job", lowercase_arn=False
    ),
    "sagemaker-endpoint-inservice": _sagemaker(
        "EndpointName", "EndpointArn", "endpoint", lowercase_arn=True
    ),
    "cloudtrail-runinstances": _runinstances,
}


def _arn_with_resource(arn: str, resource: str) -> str:
    return ":".join([*arn.split(":", 5)[:5], resource])


def _relocate(value: Any, *, account: tuple[str, str], region: tuple[str, str]) -> Any:
    """``value`` with one account id and one region replaced wherever the event names them."""
    (old_account, new_account), (old_region, new_region) = account, region
    if isinstance(value, dict):
        return {k: _relocate(v, account=account, region=region) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocate(v, account=account, region=region) for v in value]
    if not isinstance(value, str):
        return value
    if value == old_account:
        return new_account
    if value == old_region:
        return new_region
    if re.fullmatch(re.escape(old_region) + r"[a-z]", value):  # an availability zone
        return new_region + value[-1]
    if value.startswith("arn:"):
        parts = value.split(":", 5)
        if len(parts) == 6:
            parts[3] = new_region if parts[3] == old_region else parts[3]
            parts[4] = new_account if parts[4] == old_account else parts[4]
            return ":".join(parts)
    return value


def load_event(
    name: str,
    *,
    account: str | None = None,
    region: str | None = None,
    time: str | None = None,
    id: str | None = None,
    detail: dict[str, Any] | None = None,
    resource_id: str | None = None,
) -> Event:
    """A deep copy of sample ``name`` (``"ec2-instance-state-running"``, ``.json`` optional).

    ``account``/``region`` are rewritten everywhere the event names them (ARNs, account ids,
    ``awsRegion``, availability zones); ``time`` (ISO 8601) sets the envelope's ``time`` and,
    for the CloudTrail sample, ``detail.eventTime`` (the two are the same instant in a real
    event); ``id`` sets the envelope id; ``resource_id`` sets the resource in the field each
    kind uses; ``detail`` is merged into ``detail`` last, so it wins.
    """
    name = name.removesuffix(".json")
    if name not in _RESOURCE_ID:
        raise KeyError(f"no event sample {name!r}; samples: {', '.join(SAMPLES)}")
    event = copy.deepcopy(_read(name))
    if account is not None or region is not None:
        event = _relocate(
            event,
            account=(event["account"], account or event["account"]),
            region=(event["region"], region or event["region"]),
        )
    if time is not None:
        event["time"] = time
        if "eventTime" in event["detail"]:
            event["detail"]["eventTime"] = time
    if id is not None:
        event["id"] = id
    if resource_id is not None:
        _RESOURCE_ID[name](event, resource_id)
    if detail:
        event["detail"].update(detail)
    return event
