"""Hostile tests of the idle-notebook guard on moto: the warning must cover the stop.

The contract (README, Actions): the owner is warned, and "activity before the deadline
withdraws the warning"; the policy reads a warned notebook again "over the whole time
since the warning". A stop must always follow a warning about the idle spell it ends.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.cloudwatch import CloudWatchMetrics
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.decisions import Step
from costguard.domain.idle import GpuDiscovery
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.idle import IdlePolicy, IdleSettings
from tests.support.clock import MIDDAY
from tests.support.idle_fleet import REGION, gpu_dims, launch, notebook_tags, publish_ec2, put

GRACE = timedelta(hours=1)
ACCOUNT = "123456789012"


class Alerts:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def publish(self, alert: Any) -> str:
        self.sent.append(alert)
        return str(len(self.sent))


def _guard(session: Any) -> tuple[IdlePolicy, Ec2InstanceActuator]:
    clients = ClientFactory(session, account=ACCOUNT)
    policy = IdlePolicy(
        NotebookCandidateSource(clients, PerResourceTags(clients), sagemaker=False),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(
            regions=(REGION,),
            account=ACCOUNT,
            grace=GRACE,
            gpu_discovery=GpuDiscovery.LIST,  # moto does not evaluate SEARCH
        ),
    )
    return policy, Ec2InstanceActuator(clients)


def _run(session: Any, ledger: Any, alerts: Alerts, at: datetime) -> dict[str, Step]:
    policy, actuator = _guard(session)
    executor = Executor([actuator], ledger, alerts, ExecutorSettings(scope=ACCOUNT, dry_run=False))
    report = executor.run(policy.decide(at), at)
    return {o.decision.target.id: o.step for o in report.outcomes}


def _state(session: Any, iid: str) -> str:
    ec2 = session.client("ec2", region_name=REGION)
    (r,) = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
    return str(r["Instances"][0]["State"]["Name"])


def test_activity_after_the_warning_withdraws_it_even_when_the_next_run_is_late(
    aws: Any,
) -> None:
    """Defect: a warned notebook is judged at the deadline over only `window + grace`
    ending *now* (services/idle.py _select: c.window = window + self._s.grace), not over
    the time since the warning. When the run at the deadline is late (a failed or
    throttled invocation, or idleRate longer than idleGraceMinutes, e.g. '6 hours', which
    the settings allow), the owner's activity right after the warning is not read and the
    notebook is stopped on the old warning, although that activity came before the
    deadline and should have withdrawn it."""
    # GIVEN an idle GPU notebook, warned at MIDDAY (deadline MIDDAY + 1 h)
    (iid,) = launch(aws, notebook_tags(Name="nb"), at=MIDDAY - timedelta(hours=3))
    publish_ec2(aws, iid, MIDDAY - timedelta(hours=3), MIDDAY + timedelta(hours=8))
    ledger, alerts = InMemoryLedger(), Alerts()
    assert _run(aws, ledger, alerts, MIDDAY)[iid] is Step.WARNED
    # AND its owner worked on the GPU 20 minutes later, before the deadline, then left
    put(
        aws,
        "CWAgent",
        "nvidia_smi_utilization_gpu",
        gpu_dims(iid, 0),
        [(MIDDAY + timedelta(minutes=20 + 5 * i), 80.0) for i in range(6)],
    )
    # WHEN the next run comes 6 hours after the warning
    steps = _run(aws, ledger, alerts, MIDDAY + timedelta(hours=6))
    # THEN the old warning was withdrawn by that activity: no stop without a new warning
    assert steps[iid] is not Step.ACTED, steps
    assert _state(aws, iid) == "running"


def test_a_notebook_stopped_by_its_owner_during_the_grace_period_is_warned_again_after_a_restart(
    aws: Any,
) -> None:
    """Defect: the owner answers a warning by stopping the notebook. The guard lists only
    running instances (adapters/notebooks.py), so it makes no decision for it, and the
    warning is never withdrawn: the tag costguard:action-after stays on the instance and
    the ledger's 'warned' record stays valid. Days later the owner starts it again; as soon
    as it is idle for one window, services/executor.py _deadline trusts that old deadline
    (the policy's plausibility check is not repeated there) and stops the new session at
    once, with no warning about it."""
    # GIVEN a warned idle notebook, which its owner stops himself during the grace period
    (iid,) = launch(aws, notebook_tags(Name="nb"), at=MIDDAY - timedelta(hours=3))
    publish_ec2(aws, iid, MIDDAY - timedelta(hours=3), MIDDAY + timedelta(hours=9))
    ledger, alerts = InMemoryLedger(), Alerts()
    assert _run(aws, ledger, alerts, MIDDAY)[iid] is Step.WARNED
    ec2 = aws.client("ec2", region_name=REGION)
    ec2.stop_instances(InstanceIds=[iid])
    _run(aws, ledger, alerts, MIDDAY + timedelta(minutes=30))
    # AND starts it again 5 hours later (a new session, idle since)
    from costguard_demo.fleet import backdate_instances

    ec2.start_instances(InstanceIds=[iid])
    backdate_instances(REGION, {iid: MIDDAY + timedelta(hours=5)})
    warned_before = len(alerts.sent)
    # WHEN the guard runs once the new session has been idle for a whole window
    steps = _run(aws, ledger, alerts, MIDDAY + timedelta(hours=6, minutes=10))
    # THEN its owner is warned about this session before any stop
    assert steps.get(iid) is Step.WARNED, steps
    assert _state(aws, iid) == "running"
    assert len(alerts.sent) == warned_before + 1
