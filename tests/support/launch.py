"""The on-launch Lambda's world on moto (in-process or server): the ledger, the alert topic
and its SQS subscriber, and the check as ``wiring.launch`` builds it, on a session of its
own whose every call and every HTTP attempt is counted.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from costguard_demo.plumbing import create_alert_channels, create_ledger_table, drain

REGION = "us-east-1"
ACCOUNT = "123456789012"
#: Another account: not this deployment's, and not one of its members.
FOREIGN = "210987654321"


class Calls:
    """AWS API calls (``before-call``) and HTTP attempts, retries included (``before-send``),
    by ``service.Operation``: a retry is an attempt that is not a call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()

    def attach(self, session: Any) -> None:
        session.events.register("before-call", self._call)
        # First: moto in-process answers from a before-send handler of its own.
        session.events.register_first("before-send", self._attempt)

    def _call(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[f"{model.service_model.service_name}.{model.name}"] += 1

    def _attempt(self, event_name: str, **_: Any) -> None:
        # before-send.<service id>.<Operation>
        _, service, operation = event_name.split(".", 2)
        with self._lock:
            self.attempts[f"{service}.{operation}"] += 1

    def total(self) -> int:
        return sum(self.calls.values())

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts.clear()


@dataclass
class LaunchWorld:
    """One account with CostGuard deployed: run instances, hand events to the check."""

    session: Any
    topic: str
    queue: str
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, session: Any) -> LaunchWorld:
        create_ledger_table(session, "ledger", REGION)
        topic, queue = create_alert_channels(session, REGION)
        return cls(session, topic, queue)

    def settings(self) -> Any:
        from costguard.env import Env
        from costguard.settings import Settings

        return Settings.from_env(
            {
                Env.REGIONS: REGION,
                Env.TABLE_NAME: "ledger",
                Env.SCOPE: ACCOUNT,
                Env.TOPIC_ARN: self.topic,
                Env.SAGEMAKER_TAGS: "per-resource",
                Env.SAGEMAKER_STUDIO: "false",
                **self.env,
            }
        )

    def check(
        self, calls: Calls | None = None, *, hooks: Callable[[Any], None] | None = None
    ) -> Any:
        """The check as the Lambda builds it, on a fresh session (a cold container) whose
        calls ``calls`` counts; ``hooks`` registers more handlers on it first."""
        import boto3

        from costguard.wiring.launch import build_launch_check

        session = boto3.Session()
        if hooks is not None:
            hooks(session)
        if calls is not None:
            calls.attach(session)
        check = build_launch_check(self.settings(), session)
        assert check is not None
        return check

    def run_instances(
        self, instance_type: str, count: int = 1, tags: Mapping[str, str] | None = None
    ) -> list[str]:
        ec2 = self.session.client("ec2", region_name=REGION)
        spec = (
            [
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ]
            if tags
            else []
        )
        out = ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType=instance_type,
            MinCount=count,
            MaxCount=count,
            TagSpecifications=spec,
        )
        return [str(i["InstanceId"]) for i in out["Instances"]]

    def published(self) -> list[dict[str, Any]]:
        """What the topic's subscriber received since last asked."""
        return drain(self.session, self.queue, REGION)


def running(instance: str, at: datetime, **overrides: Any) -> dict[str, Any]:
    """EventBridge's recorded ``running`` event for ``instance`` at ``at``."""
    from tests.support.events import load_event

    return load_event(
        "ec2-instance-state-running",
        resource_id=instance,
        time=at.isoformat().replace("+00:00", "Z"),
        **overrides,
    )


def state_event(state: str, instance: str, at: datetime, **overrides: Any) -> dict[str, Any]:
    """The recorded EC2 state-change event of ``state`` (pending, running, stopped)."""
    from tests.support.events import load_event

    return load_event(
        f"ec2-instance-state-{state}",
        resource_id=instance,
        time=at.isoformat().replace("+00:00", "Z"),
        **overrides,
    )
