"""The maximum-lifetime guard on moto: a ledger table, its settings, one run through the
actuator Lambda's handler, and the instants of one instance's lifetime."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from costguard.domain.tags import Tags
from costguard.env import Env
from tests.support.clock import MIDDAY
from tests.support.idle_fleet import REGION

ACCOUNT = "123456789012"
LAUNCHED = MIDDAY - timedelta(hours=10)
#: costguard:max-hours=12 on an instance launched at LAUNCHED ends here.
END = LAUNCHED + timedelta(hours=12)
#: In the warning window (the grace period, 60 minutes, and one run, 15 minutes, before the
#: end): the deadline is the end itself.
WARN_AT = END - timedelta(minutes=70)
AFTER = END + timedelta(minutes=5)


def settings(*, dry_run: bool = False, max_gpu_hours: int = 0) -> Any:
    from costguard.settings import Settings

    return Settings.from_env(
        {
            Env.REGIONS: REGION,
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: ACCOUNT,
            Env.DRY_RUN: "true" if dry_run else "false",
            Env.SAGEMAKER_TAGS: "per-resource",
            Env.SAGEMAKER_STUDIO: "false",
            Env.MAX_GPU_HOURS: str(max_gpu_hours),
        }
    )


def run(session: Any, at: datetime, **kw: Any) -> dict[str, Any]:
    from costguard.handlers.act import process, summary

    report = process(
        {"time": at.isoformat(), "guard": "max-lifetime"}, settings(**kw), session, clock=at
    )
    return summary(report)


def instance(session: Any, iid: str) -> tuple[str, dict[str, str]]:
    ec2 = session.client("ec2", region_name=REGION)
    (r,) = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
    i = r["Instances"][0]
    return str(i["State"]["Name"]), {t["Key"]: t["Value"] for t in i.get("Tags", [])}


def tagged(**extra: str) -> dict[str, str]:
    return {Tags.PROJECT: "vision", Tags.OWNER: "alice@example.com", **extra}
