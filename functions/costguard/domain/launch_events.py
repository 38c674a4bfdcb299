"""What a launch event says: the EventBridge shapes AWS sends when an accelerator starts
(EC2 state changes, SageMaker notebook, endpoint and training-job state changes, CloudTrail's
``RunInstances``), read totally (any JSON gives an answer, never an exception), and who
launched it. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from costguard.domain.calendar import MAX_EVENT_AGE, MAX_EVENT_LEAD, require_utc
from costguard.domain.models import ResourceKind
from costguard.domain.tags import Tags
from costguard.domain.text import truncate

#: At most this many instances of one ``RunInstances`` call are judged from its event.
MAX_INSTANCES_PER_CALL = 20

ACCOUNT = re.compile(r"[0-9]{12}")
REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}")
INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")
#: SageMaker's own rule for notebook, endpoint and training job names.
SAGEMAKER_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")

EC2_STATE_CHANGE = "EC2 Instance State-change Notification"
NOTEBOOK_STATE_CHANGE = "SageMaker Notebook Instance State Change"
ENDPOINT_STATE_CHANGE = "SageMaker Endpoint State Change"
TRAINING_STATE_CHANGE = "SageMaker Training Job State Change"
API_CALL = "AWS API Call via CloudTrail"

#: The states that start spending, per kind: the only ones judged.
LAUNCH_STATES: Mapping[ResourceKind, frozenset[str]] = {
    ResourceKind.EC2_INSTANCE: frozenset({"pending", "running"}),
    ResourceKind.SAGEMAKER_NOTEBOOK: frozenset({"InService"}),
    ResourceKind.SAGEMAKER_ENDPOINT: frozenset({"InService"}),
    ResourceKind.SAGEMAKER_TRAINING_JOB: frozenset({"InProgress"}),
}


def _canonical_state(kind: ResourceKind, state: str) -> str | None:
    """The describe call's spelling of a launch state, from the event's: SageMaker's endpoint
    events say ``IN_SERVICE`` where DescribeEndpoint says ``InService``."""
    wanted = state.replace("_", "").lower()
    return next((s for s in LAUNCH_STATES[kind] if s.lower() == wanted), None)


#: detail-type -> (kind, the detail field naming the resource, the field of its status).
_SAGEMAKER: Mapping[str, tuple[ResourceKind, str, str]] = {
    NOTEBOOK_STATE_CHANGE: (
        ResourceKind.SAGEMAKER_NOTEBOOK,
        "NotebookInstanceName",
        "NotebookInstanceStatus",
    ),
    ENDPOINT_STATE_CHANGE: (ResourceKind.SAGEMAKER_ENDPOINT, "EndpointName", "EndpointStatus"),
    TRAINING_STATE_CHANGE: (
        ResourceKind.SAGEMAKER_TRAINING_JOB,
        "TrainingJobName",
        "TrainingJobStatus",
    ),
}


@dataclass(frozen=True, slots=True)
class LaunchEvent:
    """One resource that an EventBridge event says started spending."""

    kind: ResourceKind
    account: str
    region: str
    #: The instance id, or the SageMaker notebook, endpoint or training job name.
    resource_id: str
    state: str
    at: datetime
    event_id: str
    #: Who made the call, when the event says (a CloudTrail API-call event does).
    launched_by: str | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """An event that is not judged, and why. ``hostile``: malformed or out of bounds (logged
    as a warning); otherwise simply not a launch CostGuard checks (logged as info)."""

    reason: str
    hostile: bool = True


def _text(value: Any, limit: int = 256) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _event_time(value: Any, now: datetime) -> datetime | Refused:
    text = _text(value, 64)
    if text is None:
        return Refused("the event has no time")
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return Refused(f"the event's time {truncate(text, 40)!r} is not an ISO-8601 time")
    try:
        at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    except OverflowError:  # an offset that moves it past year 1 or 9999
        return Refused(f"the event's time {truncate(text, 40)!r} is outside the calendar in UTC")
    if at < now - MAX_EVENT_AGE:
        return Refused(
            f"the event is from {at:%Y-%m-%d %H:%M} UTC, more than "
            f"{int(MAX_EVENT_AGE.total_seconds() // 3600)} hours ago: the scan has judged it since",
            hostile=False,
        )
    if at > now + MAX_EVENT_LEAD:
        return Refused(f"the event's time {at:%Y-%m-%d %H:%M} UTC is ahead of the clock")
    return at


def identity_of(detail: Mapping[str, Any]) -> str | None:
    who = detail.get("userIdentity")
    if not isinstance(who, Mapping):
        return None
    arn = _text(who.get("arn"), 2048)
    if arn is None:
        return _text(who.get("principalId"), 256)
    # arn:aws:sts::123456789012:assumed-role/Admin/maria -> assumed-role/Admin/maria
    name = arn.split(":", 5)[-1]
    if len(name) > 200 and "/" in name:
        # An IAM path may be 512 characters: keep the type and the name, not the path
        # (a cut between whole tokens would leave only the ellipsis of an ARN).
        name = f"{name.split('/', 1)[0]}/…/{name.rsplit('/', 1)[-1]}"
    return truncate(name, 200)


def parse_launch_event(raw: Any, now: datetime) -> list[LaunchEvent] | Refused:
    """The launches an EventBridge event reports, or why it is refused. Total: any JSON value
    gives an answer, never an exception. A ``RunInstances`` API-call event reports each of
    its instances (at most :data:`MAX_INSTANCES_PER_CALL`)."""
    now = require_utc(now)
    if not isinstance(raw, Mapping):
        return Refused("the event is not a JSON object")
    detail_type, source = raw.get("detail-type"), raw.get("source")
    detail = raw.get("detail")
    if not isinstance(detail, Mapping):
        return Refused("the event has no detail object")
    account, region = _text(raw.get("account"), 12), _text(raw.get("region"), 32)
    if account is None or not ACCOUNT.fullmatch(account):
        return Refused("the event's account is not a 12-digit AWS account id")
    if region is None or not REGION.fullmatch(region):
        return Refused("the event's region is not an AWS region name")
    at = _event_time(raw.get("time"), now)
    if isinstance(at, Refused):
        return at
    event_id = _text(raw.get("id"), 128) or ""

    def one(
        kind: ResourceKind, rid: Any, state: Any, who: str | None = None
    ) -> LaunchEvent | Refused:
        pattern = INSTANCE_ID if kind is ResourceKind.EC2_INSTANCE else SAGEMAKER_NAME
        name = _text(rid, 63 if kind is not ResourceKind.EC2_INSTANCE else 19)
        if name is None or not pattern.fullmatch(name):
            return Refused(f"the event names no valid {kind.value} id")
        text = _text(state, 32)
        status = _canonical_state(kind, text) if text is not None else None
        if status is None:
            return Refused(
                f"{kind.value} state {truncate(str(state), 32)!r} is not a launch", hostile=False
            )
        assert isinstance(at, datetime)
        return LaunchEvent(kind, account, region, name, status, at, event_id, who)

    if source == "aws.ec2" and detail_type == EC2_STATE_CHANGE:
        found = one(ResourceKind.EC2_INSTANCE, detail.get("instance-id"), detail.get("state"))
        return found if isinstance(found, Refused) else [found]
    if source == "aws.sagemaker" and isinstance(detail_type, str) and detail_type in _SAGEMAKER:
        kind, name_field, status_field = _SAGEMAKER[str(detail_type)]
        found = one(kind, detail.get(name_field), detail.get(status_field))
        return found if isinstance(found, Refused) else [found]
    if (
        source == "aws.ec2"
        and detail_type == API_CALL
        and detail.get("eventName") == "RunInstances"
    ):
        if detail.get("errorCode"):
            return Refused("the RunInstances call failed: nothing was launched", hostile=False)
        response = detail.get("responseElements")
        instances = response.get("instancesSet") if isinstance(response, Mapping) else None
        items = instances.get("items") if isinstance(instances, Mapping) else None
        if not isinstance(items, list) or not items:
            return Refused("the RunInstances event lists no instances")
        who = identity_of(detail)
        events: list[LaunchEvent] = []
        for item in items[:MAX_INSTANCES_PER_CALL]:
            rid = item.get("instanceId") if isinstance(item, Mapping) else None
            found = one(ResourceKind.EC2_INSTANCE, rid, "pending", who)
            if isinstance(found, Refused):
                return found
            events.append(found)
        return events
    return Refused(
        f"not a launch event CostGuard checks (source {truncate(str(source), 40)!r}, "
        f"detail-type {truncate(str(detail_type), 60)!r})"
    )


# -- who launched it ----------------------------------------------------------------------

#: Tags AWS puts on what its automation launches, and how that launcher is named.
_AUTOMATION = (
    (Tags.EKS_NODEGROUP, "EKS node group"),
    ("karpenter.sh/nodepool", "Karpenter node pool"),
    ("aws:autoscaling:groupName", "Auto Scaling group"),
    ("aws:ec2spot:fleet-request-id", "Spot Fleet request"),
    ("aws:ec2:fleet-id", "EC2 Fleet"),
    ("aws:cloudformation:stack-name", "CloudFormation stack"),
)


def launcher_from_tags(tags: Mapping[str, str], *, aws_only: bool = False) -> str | None:
    """The automation that launched an instance, from the tags its automation puts on it.
    ``aws_only``: only AWS's reserved ``aws:`` tags, which no one launching can set (an
    ``eks:`` or ``karpenter.sh/`` tag is settable, so it is not proof of automation)."""
    for key, label in _AUTOMATION:
        if aws_only and not key.startswith("aws:"):
            continue
        value = tags.get(key)
        if value:
            return f"{label} {truncate(value, 120)}"
    return None
