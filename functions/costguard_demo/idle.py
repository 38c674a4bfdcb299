"""Demo chapter: the idle-notebook guard's warn -> stop cycle, with simulated time.

Four EC2 notebooks on the embedded AWS, with an hour of back-dated CloudWatch metrics:
an idle GPU notebook (warned, then stopped after the grace period), a busy one (left
alone), an exempt one (skipped) and one that publishes no metrics (unknown: never
acted on). The lead wires :func:`run_idle_chapter` into ``costguard demo``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from costguard.ports import Ledger

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.cloudwatch import CloudWatchMetrics
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.idle import GpuDiscovery
from costguard.domain.tags import Tags
from costguard.domain.text import duration, labelled
from costguard.handlers.act import actions
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.idle import IdlePolicy, IdleSettings
from costguard_demo.fleet import backdate_instances
from costguard_demo.server import DEMO_ACCOUNT

GRACE = timedelta(hours=1)


class _Told:
    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say

    def publish(self, alert: Any) -> str:
        self._say(f"  -> owner told: {alert.title}")
        return alert.alert_id  # type: ignore[no-any-return]


def launch_notebook(
    session: Any,
    region: str,
    name: str,
    at: datetime,
    account: str = DEMO_ACCOUNT,
    *,
    project: str = "vision-research",
    **extra: str,
) -> str:
    """An EC2 notebook (``costguard:role=notebook``, of ``project``: by default the demo
    fleet's vision-research), launched at ``at``."""
    tags = {
        Tags.PROJECT: project,
        Tags.ROLE: "notebook",
        Tags.OWNER: "alice@example.com",
        "Name": name,
        **extra,
    }
    ec2 = session.client("ec2", region_name=region)
    iid = str(
        ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType="g5.xlarge",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                }
            ],
        )["Instances"][0]["InstanceId"]
    )
    backdate_instances(region, {iid: at}, account)
    return iid


def publish_metrics(
    session: Any, region: str, iid: str, start: datetime, end: datetime, gpu: float
) -> None:
    """Five-minute GPU (CloudWatch agent), CPU and network points from ``start`` to ``end``:
    ``gpu`` percent busy; CPU and network low either way."""
    cw = session.client("cloudwatch", region_name=region)
    series = [
        (
            "CWAgent",
            "nvidia_smi_utilization_gpu",
            {"InstanceId": iid, "index": "0", "name": "NVIDIA A10G", "host": "ip-10-0-0-1"},
            gpu,
        ),
        ("AWS/EC2", "CPUUtilization", {"InstanceId": iid}, 1.0),
        ("AWS/EC2", "NetworkIn", {"InstanceId": iid}, 20_000.0),
        ("AWS/EC2", "NetworkOut", {"InstanceId": iid}, 20_000.0),
    ]
    for namespace, metric, dims, value in series:
        data = []
        t = start
        while t < end:
            data.append(
                {
                    "MetricName": metric,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
                    "Timestamp": t,
                    "Value": value,
                }
            )
            t += timedelta(minutes=5)
        cw.put_metric_data(Namespace=namespace, MetricData=data)


def run_idle_chapter(
    session: Any,
    region: str,
    say: Callable[[str], None],
    now: datetime,
    ledger: Ledger | None = None,
) -> list[dict[str, Any]]:
    """Warn an idle GPU notebook, stop it after the grace period; returns the actions."""
    launched = now - timedelta(hours=3)
    idle = launch_notebook(session, region, "idle-gpu-notebook", launched)
    busy = launch_notebook(session, region, "busy-gpu-notebook", launched)
    launch_notebook(session, region, "exempt-notebook", launched, **{Tags.EXEMPT: "true"})
    launch_notebook(session, region, "no-metrics-notebook", launched)
    start, end = now - timedelta(hours=2), now + GRACE + timedelta(minutes=30)
    publish_metrics(session, region, idle, start, end, gpu=0.0)
    publish_metrics(session, region, busy, start, end, gpu=92.0)

    clients = ClientFactory(session, account=DEMO_ACCOUNT)
    policy = IdlePolicy(
        NotebookCandidateSource(clients, PerResourceTags(clients), sagemaker=False),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(
            regions=(region,),
            account=DEMO_ACCOUNT,
            grace=GRACE,
            # The embedded AWS (moto) does not evaluate SEARCH: list the GPU series first.
            gpu_discovery=GpuDiscovery.LIST,
        ),
    )
    executor = Executor(
        [Ec2InstanceActuator(clients)],
        ledger or InMemoryLedger(),
        _Told(say),
        ExecutorSettings(scope=DEMO_ACCOUNT, dry_run=False),
    )
    out: list[dict[str, Any]] = []
    for label, at in (
        ("now", now),
        (f"{duration(GRACE)} later", now + GRACE + timedelta(minutes=1)),
    ):
        say(f"Idle notebooks, {label} ({at:%H:%M} UTC):")
        decisions = policy.decide(at)
        for d in decisions:
            say(f"  {d.target.name}: {labelled(str(d.evidence.get('verdict')), d.reason)}")
        report = executor.run(decisions, at)
        for action in actions(report):
            say(f"  {action['outcome']}: {action['resource']} ({action['detail']})")
            out.append(action)
    return out
