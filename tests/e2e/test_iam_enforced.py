"""Every AWS call CostGuard makes is allowed by the role the stack gives that function.

The synthesized stack is "deployed" onto moto's HTTP server: its table, topic, secret
and queues are created from the template's own properties, every intrinsic in the
roles' policies is resolved to those concrete ARNs, the roles are created in moto IAM,
and each handler runs with its role's assumed credentials while moto enforces IAM
(the harness: ``tests/support/iam_enforced.py``).

moto checks the action only (neither resource nor condition), so every call the run
makes is also recorded (``before-call``) and checked against the synthesized policies
by ``iam_model``: action, the exact resource ARN, and the KMS use the call implies
(DynamoDB on an encrypted table, SNS on an encrypted topic, Secrets Manager on an
encrypted secret) against the key policy. The run must also use every action the role
is granted, save a short list of reasons: grants nothing uses are not kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.env import Env
from costguard_demo.fleet import DEMO_SPOT_PRICES, install_spot_prices, seed_fleet
from costguard_demo.server import moto_backend
from tests.infra.iam_model import ACCOUNT, REGION, as_list
from tests.support.clock import MIDDAY
from tests.support.endpoints import oversized_endpoint, put_gpu
from tests.support.iam_enforced import (
    INSTANCE_TAGS,
    MOTO_OVERRIDES,
    Deployment,
    Recorder,
    check_calls,
    deploy,
    drain_alerts,
    function_environment,
    moto_dialect,
    run_as,
    unused_grants,
)

pytestmark = [pytest.mark.e2e, pytest.mark.infra]


@pytest.fixture
def aws(moto_server: str) -> str:
    """The worker's moto server, reset: each test deploys the stack onto an empty AWS."""
    return moto_server


@pytest.fixture(scope="module")
def body() -> dict[str, Any]:
    from tests.infra.synth import synthesize

    return synthesize().body


@pytest.fixture
def slack() -> Iterator[Any]:
    from costguard_demo.slack_standin import SlackStandIn

    with SlackStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def deployment(aws: str, body: dict[str, Any], slack: Any) -> Deployment:
    deployed = deploy(body, slack)
    seed_fleet(deployed.session, MIDDAY - timedelta(minutes=15))
    sm = deployed.session.client("sagemaker", region_name=REGION)
    sm.create_training_job(
        TrainingJobName="llm-sft",
        AlgorithmSpecification={
            "TrainingImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/sft:1",
            "TrainingInputMode": "File",
        },
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/sagemaker",
        OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
        ResourceConfig={
            "InstanceType": "ml.p3.2xlarge",
            "InstanceCount": 1,
            "VolumeSizeInGB": 50,
        },
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=[{"Key": "costguard:project", "Value": "llm-pretraining"}],
    )
    # moto completes a training job at once; a running one is what the scan prices
    moto_backend("sagemaker", REGION).training_jobs["llm-sft"].training_job_status = "InProgress"
    # An A100 endpoint a day old and mostly idle: the scan reads its GPU utilization from
    # CloudWatch for the oversized-endpoint advice (and must be granted that read)
    oversized_endpoint(deployed.session, "chat", "llm-serving", MIDDAY - timedelta(days=2))
    put_gpu(
        deployed.session.client("cloudwatch", region_name=REGION),
        "chat",
        "primary",
        [(MIDDAY - timedelta(hours=h), 8.0) for h in range(1, 24)],
    )
    return deployed


@pytest.fixture
def spot_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.ec2.responses.spot_instances import SpotInstances

    # install_spot_prices patches moto's class; monkeypatch restores it after the test
    monkeypatch.setattr(
        SpotInstances, "describe_spot_price_history", SpotInstances.describe_spot_price_history
    )
    install_spot_prices(DEMO_SPOT_PRICES, MIDDAY - timedelta(hours=1))


def seed_tagged_bucket(session: Any, name: str, project: str) -> None:
    """A bucket tagged with ``project`` holding 1 TiB of Standard the day before MIDDAY."""
    s3 = session.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=name)
    s3.put_bucket_tagging(
        Bucket=name, Tagging={"TagSet": [{"Key": "costguard:project", "Value": project}]}
    )
    session.client("cloudwatch", region_name=REGION).put_metric_data(
        Namespace="AWS/S3",
        MetricData=[
            {
                "MetricName": "BucketSizeBytes",
                "Dimensions": [
                    {"Name": "BucketName", "Value": name},
                    {"Name": "StorageType", "Value": "StandardStorage"},
                ],
                "Timestamp": MIDDAY - timedelta(days=1),
                "Value": float(2**40),
                "Unit": "Bytes",
            }
        ],
    )


# -- the tests ---------------------------------------------------------------------------


def test_a_scheduled_scan_runs_with_only_the_permissions_the_stack_grants(
    deployment: Deployment, spot_prices: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the stack deployed on moto, a fleet in two regions, IAM enforced
    from costguard_demo.fleet import backdate_instances, project_tags, run_instances

    # ... and a p5 in vision-research, whose costguard:max-usd-per-hour is 40: outside its
    # project's policy, so the scan reads the policy alerts' claims (one BatchGetItem)
    ec2 = deployment.session.client("ec2", region_name=REGION)
    (p5,) = run_instances(ec2, "p5.48xlarge", project_tags("vision-research"), f"{REGION}a")
    backdate_instances(REGION, {p5: MIDDAY - timedelta(hours=1)})
    # ... and vision-research's training data in a tagged bucket, whose daily size the
    # first scan of the day reads (ListBuckets, GetResources, ListMetrics, GetMetricData)
    seed_tagged_bucket(deployment.session, "vision-research-data", "vision-research")
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the schedule invokes the scan with its role
    summary = run_as(deployment, "scan", {"time": MIDDAY.isoformat()}, monkeypatch, recorder)
    # THEN it did its job: inventory priced, ledger written, alerts published
    assert summary["ledger"] == "applied"
    assert summary["resources"] > 10
    assert summary["alerts"], "the seeded fleet is over budget: alerts must go out"
    kinds = {a["kind"] for a in summary["alerts"]}
    assert "advice-digest" in kinds, "the idle A100 endpoint"
    assert "launch-policy" in kinds, "the p5 over vision-research's $40/h"
    assert {m["alert_id"] for m in drain_alerts(deployment)} == {
        a["alert_id"] for a in summary["alerts"]
    }
    # AND every call it made is allowed by the synthesized policy, resource and key included
    used = check_calls(deployment, "scan", recorder.calls)
    # AND every action the role is granted was needed by the run (no grant is unused)
    unused = unused_grants(deployment, "scan", used)
    assert not unused, f"granted but never called: {sorted(unused)}"


def test_a_failed_publish_releases_its_claim_with_the_scan_roles_permissions(
    deployment: Deployment, spot_prices: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the alert topic is gone when the scan publishes (SNS answers NotFound)
    from botocore.exceptions import ClientError

    from costguard.handlers.scan import AfterScanError
    from costguard.services.alerts import AlertDeliveryError

    topic_arn = function_environment(deployment.world, deployment.functions["scan"])[Env.TOPIC_ARN]
    sns = deployment.session.client("sns", region_name=REGION)
    sns.delete_topic(TopicArn=topic_arn)
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the scan runs
    with pytest.raises(AfterScanError) as failure:
        run_as(deployment, "scan", {"time": MIDDAY.isoformat()}, monkeypatch, recorder)
    # THEN the publish error propagates (for Lambda's retries), not an AccessDenied from
    # releasing the alert's claim: the role may undo what it claimed
    ((step, delivery),) = failure.value.failures
    assert step == "alerts"
    assert isinstance(delivery, AlertDeliveryError), delivery
    assert delivery.run.failed, delivery
    for failed in delivery.run.failed:
        error = failed.error
        assert isinstance(error, ClientError), error
        assert error.response["Error"]["Code"] == "NotFound", error
    check_calls(deployment, "scan", recorder.calls)
    # AND once the topic is back, the retried scan publishes the alerts it could not
    recreated = sns.create_topic(Name=topic_arn.rsplit(":", 1)[1])["TopicArn"]
    assert recreated == topic_arn
    subscriber_arn = deployment.session.client("sqs", region_name=REGION).get_queue_attributes(
        QueueUrl=deployment.subscriber, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=subscriber_arn,
        Attributes={"RawMessageDelivery": "true"},
    )
    retried = run_as(deployment, "scan", {"time": MIDDAY.isoformat()}, monkeypatch, recorder)
    assert retried["alerts"], "the claims were released, so the retry publishes"
    check_calls(deployment, "scan", recorder.calls)


def test_the_slack_notifier_reads_its_secret_with_only_its_role(
    deployment: Deployment, slack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.domain.alerts import Alert, AlertKind, AlertSeverity
    from costguard.rendering import sns_message
    from costguard_demo.slack_standin import sns_event

    alert = Alert(
        alert_id="budget-threshold/llm-pretraining/80/2026-11",
        kind=AlertKind.BUDGET_THRESHOLD,
        project="llm-pretraining",
        severity=AlertSeverity.WARNING,
        title="80% of budget",
        summary="llm-pretraining has spent 80% of its budget",
        at=MIDDAY,
    )
    lambda_message = json.loads(sns_message(alert))["lambda"]
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN SNS invokes the notifier with an alert
    result = run_as(deployment, "slack", sns_event(lambda_message), monkeypatch, recorder)
    # THEN the message reached Slack, with the webhook URL read as the notifier's role
    assert result["posted"] == [alert.alert_id], result
    assert len(slack.received) == 1
    used = check_calls(deployment, "slack", recorder.calls)
    assert "secretsmanager:GetSecretValue" in used
    # (CDK's grant_read adds DescribeSecret, which the notifier does not call)
    assert unused_grants(deployment, "slack", used) <= {"secretsmanager:DescribeSecret"}


def test_a_role_without_the_grant_is_refused_by_the_enforced_run(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the scan role's policy without sns:Publish (a declaration that drifted)
    world = deployment.world
    role = world.function_role(deployment.functions["scan"])
    document = moto_dialect(world.policy_document(role))
    for statement in document["Statement"]:
        statement["Action"] = [a for a in as_list(statement["Action"]) if a != "sns:Publish"]
    document["Statement"] = [s for s in document["Statement"] if s["Action"]]
    deployment.session.client("iam").put_role_policy(
        RoleName=world.physical[role]["Ref"],
        PolicyName="synthesized",
        PolicyDocument=json.dumps(document),
    )
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the scan has an alert to publish THEN moto refuses it: enforcement is really on
    from costguard.handlers.scan import AfterScanError

    with pytest.raises(AfterScanError):
        run_as(deployment, "scan", {"time": MIDDAY.isoformat()}, monkeypatch, recorder)
    publishes = [c for c in recorder.calls if c.operation == "Publish"]
    assert publishes and all(c.status == 403 for c in publishes)
    assert os.environ.get("AWS_ENDPOINT_URL", "").startswith("http://127.0.0.1")


def test_the_actuator_acts_with_only_the_permissions_the_stack_grants(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the stack deployed on moto, IAM enforced, and a guard (the test-only toy
    # policy) registered by name, with enforcement on
    from datetime import timedelta

    from costguard.domain.tags import Tags
    from costguard.guards import SPECS
    from tests.support.toy import TOY, toy_spec

    monkeypatch.setitem(SPECS, "toy", toy_spec())
    monkeypatch.setitem(MOTO_OVERRIDES, Env.DRY_RUN, "false")  # enforce, for this run
    ec2 = deployment.session.client("ec2", region_name=REGION)

    def launch(toy: str) -> str:
        tags = [{"Key": Tags.PROJECT, "Value": "vision"}, {"Key": TOY, "Value": toy}]
        return str(
            ec2.run_instances(
                ImageId="ami-12345678",
                InstanceType="g5.xlarge",
                MinCount=1,
                MaxCount=1,
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
            )["Instances"][0]["InstanceId"]
        )

    idle, used = launch("idle"), launch("idle")
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the guard warns, one instance is used again (warning withdrawn), and the other
    # is stopped after its grace period, each run invoked with the actuator's role
    start = MIDDAY - timedelta(hours=2)
    first = run_as(
        deployment, "act", {"time": start.isoformat(), "guard": "toy"}, monkeypatch, recorder
    )
    assert first["counts"] == {"warned": 2}
    ec2.create_tags(Resources=[used], Tags=[{"Key": TOY, "Value": "busy"}])
    second = run_as(
        deployment, "act", {"time": MIDDAY.isoformat(), "guard": "toy"}, monkeypatch, recorder
    )
    assert second["counts"] == {"acted": 1, "cleared": 1}
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=[idle, used])["Reservations"]
        for i in r["Instances"]
    }
    assert states[idle] in {"stopping", "stopped"} and states[used] == "running"
    # THEN every call it made is allowed by the synthesized actuator role, conditions
    # included (evaluated here on the instances' tags), and every grant was needed
    for reservation in ec2.describe_instances(InstanceIds=[idle, used])["Reservations"]:
        for i in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            tags.pop(Tags.ACTION_AFTER, None)
            monkeypatch.setitem(INSTANCE_TAGS, i["InstanceId"], tags)
    used_actions = check_calls(deployment, "act", recorder.calls)
    unused = unused_grants(deployment, "act", used_actions)
    assert not unused, f"granted but never called: {sorted(unused)}"


def test_the_idle_guard_runs_with_only_the_permissions_the_stack_grants(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an idle GPU notebook and a busy one with back-dated metrics, IAM enforced
    from costguard.adapters import ec2
    from costguard.adapters.ec2 import InstanceTypeCache
    from tests.support.idle_fleet import launch, notebook_tags, publish_ec2

    monkeypatch.setitem(MOTO_OVERRIDES, Env.DRY_RUN, "false")
    monkeypatch.setitem(MOTO_OVERRIDES, Env.REGIONS, REGION)
    # moto does not evaluate SEARCH: the guard lists the GPU series first (ListMetrics)
    monkeypatch.setitem(MOTO_OVERRIDES, Env.IDLE_GPU_DISCOVERY, "list")
    # a cold Lambda: the instance-type cache of an earlier test would hide a missing grant
    monkeypatch.setattr(ec2, "INSTANCE_TYPES", InstanceTypeCache())
    launched = MIDDAY - timedelta(hours=5)
    (idle,) = launch(deployment.session, notebook_tags(), at=launched)
    (busy,) = launch(deployment.session, notebook_tags(), at=launched)
    start, end = MIDDAY - timedelta(hours=4), MIDDAY + timedelta(hours=2)
    publish_ec2(deployment.session, idle, start, end)
    publish_ec2(deployment.session, busy, start, end, gpu=(75.0,))
    # (and a busy CPU notebook: its type is not in the accelerator table, so EC2 is asked)
    (cpu,) = launch(deployment.session, notebook_tags(), "m5.large", at=launched)
    publish_ec2(deployment.session, cpu, start, end, gpu=(), cpu=80.0)
    # (and the seeded fleet's SageMaker notebook instances, InService without a heartbeat)
    notebooks = sorted(
        n["NotebookInstanceName"]
        for n in deployment.session.client(
            "sagemaker", region_name=REGION
        ).list_notebook_instances()["NotebookInstances"]
        if n["NotebookInstanceStatus"] == "InService"
    )
    assert notebooks, "the seeded fleet has notebook instances"
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the schedule invokes the idle guard now, and after the grace period
    event = {"guard": "idle-notebooks"}
    first = run_as(deployment, "idle", {**event, "time": MIDDAY.isoformat()}, monkeypatch, recorder)
    later = MIDDAY + timedelta(minutes=61)
    second = run_as(deployment, "idle", {**event, "time": later.isoformat()}, monkeypatch, recorder)
    # THEN it warned, then stopped the idle one only, and the seeded fleet's SageMaker
    # notebook instances (InService far longer than the maximum runtime, no heartbeat)
    assert first["counts"] == {"warned": 1 + len(notebooks)}, first["actions"]
    assert second["counts"] == {"acted": 1 + len(notebooks)}, second["actions"]
    assert sorted(a["resource"].rsplit("/", 1)[1] for a in second["actions"]) == sorted(
        [idle, *notebooks]
    )
    # AND every call was allowed by its synthesized role (conditions evaluated on the
    # instances' tags), and every grant was needed
    ec2 = deployment.session.client("ec2", region_name=REGION)
    for reservation in ec2.describe_instances(InstanceIds=[idle, busy])["Reservations"]:
        for i in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            tags.pop("costguard:action-after", None)
            monkeypatch.setitem(INSTANCE_TAGS, i["InstanceId"], tags)
    sm = deployment.session.client("sagemaker", region_name=REGION)
    for name in notebooks:
        notebook_arn = sm.describe_notebook_instance(NotebookInstanceName=name)[
            "NotebookInstanceArn"
        ]
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=notebook_arn)["Tags"]}
        tags.pop("costguard:action-after", None)
        monkeypatch.setitem(INSTANCE_TAGS, notebook_arn, tags)
    used = check_calls(deployment, "idle", recorder.calls)
    assert {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics"} <= used
    unused = unused_grants(deployment, "idle", used)
    assert not unused, f"granted but never called: {sorted(unused)}"


def test_the_stale_volume_guard_records_its_findings_with_only_its_role(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an unattached project volume whose costguard:ttl is malformed, IAM enforced
    from costguard.domain.tags import Tags

    monkeypatch.setitem(MOTO_OVERRIDES, Env.REGIONS, REGION)
    ec2 = deployment.session.client("ec2", region_name=REGION)
    tags = [{"Key": Tags.PROJECT, "Value": "vision"}, {"Key": Tags.TTL, "Value": "forever-ish"}]
    ec2.create_volume(
        AvailabilityZone=f"{REGION}a",
        Size=10,
        VolumeType="gp3",
        TagSpecifications=[{"ResourceType": "volume", "Tags": tags}],
    )
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the schedule invokes the stale-volume guard with its own role
    out = run_as(
        deployment,
        "volumes",
        {"time": MIDDAY.isoformat(), "guard": "stale-volumes"},
        monkeypatch,
        recorder,
    )
    # THEN the run completes, leaving the volume alone, and the malformed tag is a finding
    # the role could record (the ledger's findings are a query and a batch write)
    assert out["counts"] == {}
    refused = [c for c in recorder.calls if c.status == 403]
    assert not refused, [(c.service, c.operation) for c in refused]
    used = check_calls(deployment, "volumes", recorder.calls)
    assert {"dynamodb:Query", "dynamodb:BatchWriteItem"} <= used


def _launch_event(name: str, resource_id: str, at: datetime) -> dict[str, Any]:
    """EventBridge's recorded event of this kind, naming ``resource_id``, at ``at``."""
    from tests.support.events import load_event

    return load_event(
        name,
        account=ACCOUNT,
        region=REGION,
        time=at.isoformat().replace("+00:00", "Z"),
        id=f"launch-{resource_id}",
        resource_id=resource_id,
    )


def _untagged_nodegroup_node(deployed: Deployment, at: datetime) -> str:
    """A GPU node of a new node group of the seeded cluster, the group without a project
    tag (the cluster has one): the check must read the group, then the cluster."""
    from costguard.domain.tags import Tags
    from costguard_demo.fleet import backdate_instances, project_tags, run_instances

    eks = deployed.session.client("eks", region_name=REGION)
    (cluster,) = eks.list_clusters()["clusters"]
    assert Tags.PROJECT in eks.describe_cluster(name=cluster)["cluster"]["tags"]
    (seeded,) = eks.list_nodegroups(clusterName=cluster)["nodegroups"]
    template = eks.describe_nodegroup(clusterName=cluster, nodegroupName=seeded)["nodegroup"]
    eks.create_nodegroup(
        clusterName=cluster,
        nodegroupName="gpu-untagged",
        nodeRole=template["nodeRole"],
        subnets=template["subnets"],
        instanceTypes=["g5.12xlarge"],
        scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 1},
    )
    ec2 = deployed.session.client("ec2", region_name=REGION)
    tags = project_tags(**{Tags.EKS_CLUSTER: cluster, Tags.EKS_NODEGROUP: "gpu-untagged"})
    (node,) = run_instances(ec2, "g5.12xlarge", tags, f"{REGION}a")
    backdate_instances(REGION, {node: at})
    return node


def test_the_on_launch_check_runs_with_only_the_permissions_the_stack_grants(
    deployment: Deployment, spot_prices: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the stack deployed on moto, the seeded fleet, IAM enforced, and the figures of
    # a scheduled scan at noon (what the launch check weighs a project's budget against)
    from costguard import wiring
    from costguard.adapters import ec2 as ec2_adapter
    from costguard.domain.tags import Tags
    from costguard_demo.fleet import backdate_instances, project_tags, run_instances

    recorder = Recorder()
    recorder.install(monkeypatch)
    scanned = run_as(deployment, "scan", {"time": MIDDAY.isoformat()}, monkeypatch, recorder)
    assert scanned["ledger"] == "applied"
    check_calls(deployment, "scan", recorder.calls)
    drain_alerts(deployment)
    # ... and, a minute later, launches of every kind the rules hand to the Lambda: an
    # untagged p5, a spot p4d, an EKS node of an untagged node group, and the seeded
    # SageMaker notebook, endpoint and training job
    ec2 = deployment.session.client("ec2", region_name=REGION)
    at = MIDDAY + timedelta(minutes=1)
    launched = at - timedelta(seconds=12)
    (p5,) = run_instances(ec2, "p5.48xlarge", project_tags(Name="scratch"), f"{REGION}a")
    (spot,) = run_instances(
        ec2, "p4d.24xlarge", project_tags("llm-pretraining"), f"{REGION}a", spot=True
    )
    backdate_instances(REGION, {p5: launched, spot: launched})
    node = _untagged_nodegroup_node(deployment, launched)
    events = [
        _launch_event("ec2-instance-state-running", p5, at),
        _launch_event("ec2-instance-state-running", spot, at),
        _launch_event("ec2-instance-state-running", node, at),
        _launch_event("sagemaker-notebook-inservice", "recsys-explore", at),
        _launch_event("sagemaker-endpoint-inservice", "ranker-prod", at),
        _launch_event("sagemaker-training-inprogress", "llm-sft", at),
    ]
    # (a cold Lambda of its own: the scan's warm caches are not the on-launch Lambda's)
    monkeypatch.setattr(ec2_adapter.INSTANCE_TYPES, "_known", {})
    wiring.CATALOG_CACHE.clear()
    scan_calls = len(recorder.calls)
    # WHEN EventBridge invokes the on-launch Lambda with each event, with its role
    results = [run_as(deployment, "launch", e, monkeypatch, recorder) for e in events]
    # THEN each invocation returned (nothing raised for a retry) and judged its resource
    verdicts = [v for r in results for v in r["launches"]]
    assert [v["resource"].rsplit("/", 1)[1] for v in verdicts] == [
        p5,
        spot,
        node,
        "recsys-explore",
        "ranker-prod",
        "llm-sft",
    ], verdicts
    assert all(v["outcome"] in {"alerted", "quiet"} for v in verdicts), verdicts
    assert verdicts[0]["outcome"] == "alerted", verdicts[0]
    # AND the untagged p5's unattributed-spend reached the topic's SQS subscriber
    kinds = {m["kind"] for m in drain_alerts(deployment) if p5 in json.dumps(m)}
    assert "unattributed-spend" in kinds, kinds
    calls = recorder.calls[scan_calls:]
    # AND the node was judged with its node group's and its cluster's tags
    asked = {(c.service, c.operation) for c in calls}
    assert {("eks", "DescribeNodegroup"), ("eks", "DescribeCluster")} <= asked
    assert ("ec2", "DescribeSpotPriceHistory") in asked
    # AND every call it made is allowed by the synthesized on-launch role, resource and key
    # included, as moto enforced it (the launcher swallows a refused LookupEvents as "not
    # known yet": check_calls finds the refusal in the recorded answers instead)
    used = check_calls(deployment, "launch", calls)
    assert "cloudtrail:LookupEvents" in used
    # AND every action the role is granted was needed by the run (no grant is unused)
    unused = unused_grants(deployment, "launch", used)
    assert not unused, f"granted but never called: {sorted(unused)}"
    # (the node group the check read had no project tag of its own)
    assert Tags.PROJECT not in (
        deployment.session.client("eks", region_name=REGION)
        .describe_nodegroup(clusterName="vision-eks", nodegroupName="gpu-untagged")["nodegroup"]
        .get("tags", {})
    )


def test_the_on_launch_role_may_not_stop_what_it_judges(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a running GPU instance and an InService notebook, and a client signed with the
    # on-launch role's credentials while moto enforces IAM
    import boto3
    from botocore.exceptions import ClientError
    from moto.core.authorization import enable_iam_authentication

    world = deployment.world
    role = world.function_role(deployment.functions["launch"])
    assumed = deployment.credentials[role]
    as_launch = boto3.Session(
        aws_access_key_id=assumed["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=assumed["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=assumed["AWS_SESSION_TOKEN"],
        region_name=REGION,
    )
    admin_ec2 = deployment.session.client("ec2", region_name=REGION)
    (instance,) = [
        i["InstanceId"]
        for r in admin_ec2.describe_instances(
            Filters=[{"Name": "instance-type", "Values": ["p5.48xlarge"]}]
        )["Reservations"]
        for i in r["Instances"]
    ][:1]
    # WHEN it reads them (granted), then tries to stop them (not granted)
    with enable_iam_authentication():
        described = as_launch.client("ec2").describe_instances(InstanceIds=[instance])
        assert described["Reservations"], "the role's reads work: the credentials are good"
        with pytest.raises(ClientError) as stop_instance:
            as_launch.client("ec2").stop_instances(InstanceIds=[instance])
        as_launch.client("sagemaker").describe_notebook_instance(
            NotebookInstanceName="recsys-explore"
        )
        with pytest.raises(ClientError) as stop_notebook:
            as_launch.client("sagemaker").stop_notebook_instance(
                NotebookInstanceName="recsys-explore"
            )
    # THEN both are refused, and both resources still run
    for refused in (stop_instance.value, stop_notebook.value):
        assert refused.response["ResponseMetadata"]["HTTPStatusCode"] == 403, refused.response
    states = admin_ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"]
    assert states[0]["State"]["Name"] == "running"
    notebook = deployment.session.client("sagemaker", region_name=REGION)
    status = notebook.describe_notebook_instance(NotebookInstanceName="recsys-explore")
    assert status["NotebookInstanceStatus"] == "InService"


@pytest.fixture(scope="module")
def answers_body() -> dict[str, Any]:
    from tests.infra.synth import synthesize_answers

    return synthesize_answers()


def test_a_guard_with_answers_signs_its_warnings_links_with_only_its_role(
    aws: str, answers_body: dict[str, Any], slack: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the stack with answers on, deployed on moto, IAM enforced, and the toy guard
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.constants import DEFAULT_PROVIDERS
    from moto.sns import sns_backends

    from costguard.domain.tags import Tags
    from costguard.guards import SPECS
    from tests.support.toy import TOY, toy_spec

    deployment = deploy(answers_body, slack)
    monkeypatch.setitem(SPECS, "toy", toy_spec())
    monkeypatch.setitem(MOTO_OVERRIDES, Env.DRY_RUN, "false")
    # Powertools keeps one secrets client per process: the guard builds its own, under its
    # role's credentials, and it is dropped afterwards
    parameters.clear_caches()
    monkeypatch.setitem(DEFAULT_PROVIDERS, "secrets", None)
    del DEFAULT_PROVIDERS["secrets"]
    ec2 = deployment.session.client("ec2", region_name=REGION)
    owned = [
        {"Key": Tags.PROJECT, "Value": "vision"},
        {"Key": TOY, "Value": "idle"},
        {"Key": Tags.OWNER, "Value": "alice@example.com"},
    ]
    (instance,) = [
        i["InstanceId"]
        for i in ec2.run_instances(
            ImageId="ami-12345678",
            InstanceType="g5.xlarge",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": owned}],
        )["Instances"]
    ]
    recorder = Recorder()
    recorder.install(monkeypatch)
    # WHEN the guard warns, then acts after the deadline, each run with its role
    start = MIDDAY - timedelta(hours=2)
    first = run_as(
        deployment, "act", {"time": start.isoformat(), "guard": "toy"}, monkeypatch, recorder
    )
    second = run_as(
        deployment, "act", {"time": MIDDAY.isoformat(), "guard": "toy"}, monkeypatch, recorder
    )
    parameters.clear_caches()
    assert (first["counts"], second["counts"]) == ({"warned": 1}, {"acted": 1})
    # THEN the warning's e-mail carries its links, signed with the link key it read
    topic = deployment.world.resolve(
        function_environment(deployment.world, deployment.functions["act"])[Env.TOPIC_ARN]
    )
    warnings = [
        json.loads(message)["email"]
        for _id, message, *_ in sns_backends[ACCOUNT][REGION].topics[topic].sent_notifications
        if "will stop" in json.loads(message)["email"]
    ]
    assert len(warnings) == 1 and warnings[0].count("answer?t=") == 4
    # AND every call (the link key's read, and its decryption through Secrets Manager
    # included) is allowed by the synthesized role, and every grant was needed but
    # DescribeSecret (added by CDK's grant_read; nothing calls it)
    for reservation in ec2.describe_instances(InstanceIds=[instance])["Reservations"]:
        for i in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            tags.pop(Tags.ACTION_AFTER, None)
            monkeypatch.setitem(INSTANCE_TAGS, i["InstanceId"], tags)
    used = check_calls(deployment, "act", recorder.calls)
    reads = {
        c.params["SecretId"]
        for c in recorder.calls
        if (c.service, c.operation) == ("secretsmanager", "GetSecretValue")
    }
    link_key = deployment.world.resolve(
        function_environment(deployment.world, deployment.functions["act"])[Env.LINK_SECRET]
    )
    assert reads == {link_key}
    assert "secretsmanager:GetSecretValue" in used
    assert unused_grants(deployment, "act", used) <= {"secretsmanager:DescribeSecret"}
