"""The demo's launch chapter: a GPU started mid-story is alerted within seconds, before the
next scan, by the on-launch Lambda's own code, from the event EventBridge would deliver."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from costguard.domain.text import plural


def state_change_event(account: str, region: str, instance_id: str, at: datetime) -> dict[str, Any]:
    """EC2's "running" state-change event, in the shape EventBridge delivers it (the same
    shape as tests/fixtures/events/ec2-instance-state-running.json)."""
    return {
        "version": "0",
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"costguard-demo/{instance_id}/{at.isoformat()}")),
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": account,
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "state": "running"},
    }


def check_launch(
    settings: Any,
    session: Any,
    say: Callable[[str], None],
    instance_id: str,
    region: str,
    event_at: datetime,
    checked_at: datetime,
) -> list[dict[str, Any]]:
    """Hand the launch's event to the on-launch Lambda's code; what it decided, per launch."""
    from costguard.handlers.on_launch import process

    event = state_change_event(settings.scope, region, instance_id, event_at)
    answer = process(event, settings, session, clock=checked_at)
    launches: list[dict[str, Any]] = answer.get("launches", [])
    for launch in launches:
        alerts = launch.get("alerts", [])
        say(
            f"on-launch at {checked_at:%H:%M:%S} UTC ({(checked_at - event_at).seconds} s after "
            f"the event): {launch['outcome']}, {plural(len(alerts), 'alert')}"
        )
        for alert in alerts:
            say(f"    alert [{alert['severity']}] {alert['kind']}: {alert['title']}")
    return launches
