"""Hostile test of idleAllAccelerators: an instance some controller manages is no notebook."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from costguard.adapters.aws import ClientFactory
from costguard.adapters.catalog import load_catalog
from costguard.adapters.cloudwatch import CloudWatchMetrics
from costguard.adapters.ec2_actuator import Ec2InstanceActuator
from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.notebooks import NotebookCandidateSource
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.idle import GpuDiscovery
from costguard.domain.tags import Tags
from costguard.services.executor import Executor, ExecutorSettings
from costguard.services.idle import IdlePolicy, IdleSettings
from tests.support.clock import MIDDAY
from tests.support.fakes import RecordingNotifier
from tests.support.idle_fleet import REGION, launch, publish_ec2

ACCOUNT = "123456789012"


def test_all_accelerators_never_stops_an_eks_node_group_instance(aws: Any) -> None:
    """Defect: with idleAllAccelerators=true, adapters/notebooks.py ec2_notebooks takes
    every running accelerator instance, including the GPU nodes of an EKS managed node
    group (eks:cluster-name / eks:nodegroup-name, with costguard:project propagated from
    the launch template). An idle node waiting for jobs is "stopped", and its Auto Scaling
    group then replaces the stopped instance by terminating it: CostGuard, which "never
    terminates", causes a termination (and evicts the cluster's pods) through a
    'stop-instance' decision. Instances owned by a node group, an Auto Scaling group or
    Karpenter are not notebooks and must not be candidates."""
    # GIVEN an idle GPU node of an EKS managed node group, tagged with a project
    node_tags = {
        Tags.PROJECT: "vision",
        Tags.OWNER: "alice@example.com",
        Tags.EKS_CLUSTER: "vision-eks",
        "eks:nodegroup-name": "gpu-a10g",
    }
    (node,) = launch(aws, node_tags, at=MIDDAY - timedelta(hours=3))
    publish_ec2(aws, node, MIDDAY - timedelta(hours=3), MIDDAY + timedelta(hours=3))
    clients = ClientFactory(aws, account=ACCOUNT)
    policy = IdlePolicy(
        NotebookCandidateSource(
            clients, PerResourceTags(clients), sagemaker=False, all_accelerators=True
        ),
        CloudWatchMetrics(clients.cloudwatch),
        load_catalog(),
        IdleSettings(
            regions=(REGION,),
            account=ACCOUNT,
            grace=timedelta(hours=1),
            gpu_discovery=GpuDiscovery.LIST,  # moto does not evaluate SEARCH
        ),
    )
    ledger, sent = InMemoryLedger(), []
    executor = Executor(
        [Ec2InstanceActuator(clients)],
        ledger,
        RecordingNotifier(sent),
        ExecutorSettings(scope=ACCOUNT, dry_run=False),
    )
    # WHEN the idle guard runs, and again after the grace period
    for at in (MIDDAY, MIDDAY + timedelta(hours=1, minutes=5)):
        executor.run(policy.decide(at), at)
    # THEN the node is still running, never stopped
    ec2 = aws.client("ec2", region_name=REGION)
    (r,) = ec2.describe_instances(InstanceIds=[node])["Reservations"]
    assert r["Instances"][0]["State"]["Name"] == "running"
