"""A realistic ML fleet, seeded through boto3 over HTTP into the embedded AWS.

Four projects in two regions: pre-training on p5/p4d (heading over budget),
vision research on g5/g6 plus an EKS GPU node group, a serving team on SageMaker,
and an NLP team; plus the mistakes CostGuard exists to catch: an untagged GPU
box, a malformed budget tag, conflicting budgets and an unknown instance type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from costguard.domain.tags import Tags
from costguard_demo.server import DEMO_ACCOUNT, moto_backend

PRIMARY = "us-east-1"
SECONDARY = "us-west-2"

#: Spot prices the demo publishes (moto's own are a static 0.00001).
DEMO_SPOT_PRICES: dict[tuple[str, str], Decimal] = {
    ("us-east-1a", "p4d.24xlarge"): Decimal("9.8814"),
    ("us-east-1b", "p4d.24xlarge"): Decimal("10.2200"),
    ("us-west-2a", "g6.xlarge"): Decimal("0.3421"),
    ("us-west-2b", "g6.xlarge"): Decimal("0.3605"),
}


@dataclass
class Fleet:
    """What was seeded, so the demo and the tests can check the numbers."""

    instances: dict[str, str] = field(default_factory=dict)  # label -> instance id
    notebooks: list[str] = field(default_factory=list)
    endpoints: list[str] = field(default_factory=list)


def project_tags(
    project: str | None = None, budget: str | None = None, owner: str | None = None, **extra: str
) -> list[dict[str, str]]:
    tags = dict(extra)
    if project is not None:
        tags[Tags.PROJECT] = project
    if budget is not None:
        tags[Tags.BUDGET] = budget
    if owner is not None:
        tags[Tags.OWNER] = owner
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def run_instances(
    ec2: Any,
    itype: str,
    tags: list[dict[str, str]],
    az: str,
    *,
    spot: bool = False,
    count: int = 1,
    volume_gib: int = 0,
) -> list[str]:
    args: dict[str, Any] = {
        "ImageId": "ami-12345678",
        "InstanceType": itype,
        "MinCount": count,
        "MaxCount": count,
        "Placement": {"AvailabilityZone": az},
        "TagSpecifications": [{"ResourceType": "instance", "Tags": tags}] if tags else [],
    }
    if spot:
        args["InstanceMarketOptions"] = {"MarketType": "spot"}
    if volume_gib:
        args["BlockDeviceMappings"] = [
            {"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": volume_gib, "VolumeType": "gp3"}}
        ]
    return [i["InstanceId"] for i in ec2.run_instances(**args)["Instances"]]


def backdate_instances(
    region: str, launched: Mapping[str, datetime], account: str = DEMO_ACCOUNT
) -> None:
    """Set LaunchTime (and the root volume's CreateTime) on moto's backend objects."""
    backend = moto_backend("ec2", region, account)
    for instance_id, when in launched.items():
        naive = when.replace(tzinfo=None)
        instance = backend.get_instance(instance_id)
        instance.launch_time = naive
        for mapping in instance.block_device_mapping.values():
            backend.get_volume(mapping.volume_id).create_time = naive


def backdate_sagemaker(
    region: str, notebooks: Mapping[str, datetime], endpoints: Mapping[str, datetime]
) -> None:
    backend = moto_backend("sagemaker", region)
    for name, when in notebooks.items():
        nb = backend.notebook_instances[name]
        nb.creation_time = nb.last_modified_time = when.replace(tzinfo=None).isoformat()
    for name, when in endpoints.items():
        ep = backend.endpoints[name]
        ep.creation_time = ep.last_modified_time = when.replace(tzinfo=None).isoformat()
        # its configuration too: in place since then (oversized-endpoint advice reads it)
        config = backend.endpoint_configs.get(ep.endpoint_config_name)
        if config is not None:
            config.creation_time = when.replace(tzinfo=None).isoformat()


def backdate_eks(region: str, created: datetime, account: str = DEMO_ACCOUNT) -> None:
    """Set every EKS cluster's and node group's creation time on moto's backend objects
    (moto stamps them with the real clock; the cluster fee accrues from it)."""
    naive = created.astimezone(UTC).replace(tzinfo=None)
    for cluster in moto_backend("eks", region, account).clusters.values():
        cluster.created_at = naive
        for nodegroup in cluster.nodegroups.values():
            nodegroup.created_at = nodegroup.modified_at = naive


def seed_fleet(session: Any, start: datetime) -> Fleet:
    """Seed the fleet as it stood at ``start``; launch times are before it."""
    fleet = Fleet()
    east = session.client("ec2", region_name=PRIMARY)
    west = session.client("ec2", region_name=SECONDARY)

    # llm-pretraining and vision-research are the research team's, whose budget ($30,000 a
    # month, tagged once) their forecasts together go over.
    llm = project_tags(
        "llm-pretraining",
        "$12,000",
        "alice@example.com",
        **{Tags.TEAM: "research", Tags.TEAM_BUDGET: "30000"},
    )
    ids = run_instances(east, "p5.48xlarge", llm, "us-east-1a", count=2, volume_gib=2000)
    fleet.instances.update({"p5-a": ids[0], "p5-b": ids[1]})
    fleet.instances["p4d-spot"] = run_instances(east, "p4d.24xlarge", llm, "us-east-1a", spot=True)[
        0
    ]

    # vision-research keeps each resource under $40/h: a bigger launch is alerted at once.
    vision = project_tags(
        "vision-research",
        "20000",
        "U024BE7LH",
        **{Tags.MAX_USD_PER_HOUR: "40", Tags.TEAM: "research"},
    )
    fleet.instances["g5-dev"] = run_instances(
        east, "g5.2xlarge", vision, "us-east-1b", volume_gib=500
    )[0]
    fleet.instances["g6-spot"] = run_instances(west, "g6.xlarge", vision, "us-west-2a", spot=True)[
        0
    ]

    nlp = project_tags("nlp-team", "8000", "bob@example.com")
    fleet.instances["g6e"] = run_instances(west, "g6e.2xlarge", nlp, "us-west-2b")[0]
    # Someone typed a budget that is not a number; the scan names it and goes on.
    fleet.instances["g4dn-bad-budget"] = run_instances(
        west, "g4dn.xlarge", project_tags("nlp-team", "abc"), "us-west-2b"
    )[0]
    # ... and someone else tagged a different budget on the same project.
    fleet.instances["g4dn-other-budget"] = run_instances(
        west, "g4dn.2xlarge", project_tags("nlp-team", "12000"), "us-west-2a"
    )[0]

    fleet.instances["untagged"] = run_instances(
        east, "g5.xlarge", project_tags(Name="scratch-box"), "us-east-1c"
    )[0]
    fleet.instances["unknown-type"] = run_instances(
        east,
        "p9.96xlarge",
        project_tags("llm-pretraining", owner="alice@example.com"),
        "us-east-1b",
    )[0]
    # A CPU instance: out of CostGuard's scope, must not show up.
    run_instances(east, "m5.large", project_tags("llm-pretraining"), "us-east-1a")

    _seed_eks(session, east, fleet)
    _seed_sagemaker(session, fleet)

    day = timedelta(days=1)
    # The cluster came up with its nodes.
    backdate_eks(PRIMARY, start - 4 * day)
    backdate_instances(
        PRIMARY,
        {
            fleet.instances["p5-a"]: start - 6 * day,
            fleet.instances["p5-b"]: start - 2 * day,
            fleet.instances["p4d-spot"]: start - timedelta(hours=20),
            fleet.instances["g5-dev"]: start - 9 * day,
            fleet.instances["untagged"]: start - 3 * day,
            fleet.instances["unknown-type"]: start - timedelta(hours=5),
            **{i: start - 4 * day for k, i in fleet.instances.items() if k.startswith("eks-node")},
        },
    )
    backdate_instances(
        SECONDARY,
        {
            fleet.instances["g6-spot"]: start - 1 * day,
            fleet.instances["g6e"]: start - 7 * day,
            fleet.instances["g4dn-bad-budget"]: start - 2 * day,
            fleet.instances["g4dn-other-budget"]: start - 2 * day,
        },
    )
    backdate_sagemaker(
        PRIMARY,
        {"recsys-explore": start - timedelta(hours=30), "nlp-scratch": start - 3 * day},
        {"ranker-prod": start - 12 * day},
    )
    publish_ranker_traffic(session, start)
    seed_datasets_bucket(session, start)
    return fleet


#: llm-pretraining's training data: an S3 bucket tagged with the project, priced by
#: storage class from its daily BucketSizeBytes (12 TiB Standard, 80 TiB Glacier Flexible
#: Retrieval), counted as storage in the project's month.
DATASETS_BUCKET = "llm-pretraining-datasets"
DATASETS_BYTES = {"StandardStorage": 12 * 2**40, "GlacierStorage": 80 * 2**40}


def seed_datasets_bucket(session: Any, start: datetime) -> None:
    """The bucket, created two months before the story (set on moto's backend: moto stamps
    a bucket with the wall clock), and its last three days of BucketSizeBytes."""
    s3 = session.client("s3", region_name=PRIMARY)
    s3.create_bucket(Bucket=DATASETS_BUCKET)
    s3.put_bucket_tagging(
        Bucket=DATASETS_BUCKET,
        Tagging={"TagSet": project_tags("llm-pretraining", owner="alice@example.com")},
    )
    bucket = moto_backend("s3", "global").buckets[DATASETS_BUCKET]
    bucket.creation_date = start - timedelta(days=60)
    cw = session.client("cloudwatch", region_name=PRIMARY)
    midnight = start.replace(hour=0, minute=0, second=0, microsecond=0)
    cw.put_metric_data(
        Namespace="AWS/S3",
        MetricData=[
            {
                "MetricName": "BucketSizeBytes",
                "Dimensions": [
                    {"Name": "BucketName", "Value": DATASETS_BUCKET},
                    {"Name": "StorageType", "Value": kind},
                ],
                "Timestamp": midnight - timedelta(days=days),
                "Value": float(size),
                "Unit": "Bytes",
            }
            for kind, size in DATASETS_BYTES.items()
            for days in (1, 2)
        ],
    )


#: ranker-prod's predictions an hour: steady for a week, then halved on the story's last
#: day, on the same two instances ($1.88/h): $0.10 per 1,000 becomes $0.20.
RANKER_TRAFFIC = (18_800.0, 9_400.0)


def publish_ranker_traffic(session: Any, start: datetime) -> None:
    """ranker-prod's hourly ``Invocations`` (AWS/SageMaker) from 8 days before the story to
    its end: the traffic falls by half 24 hours before the end, on a fleet that stays."""
    from costguard_demo.story import STORY_END

    cw = session.client("cloudwatch", region_name=PRIMARY)
    fell = STORY_END - timedelta(hours=24)
    hours = int((STORY_END - (start - timedelta(days=8))) / timedelta(hours=1))
    first = (start - timedelta(days=8)).replace(minute=0, second=0, microsecond=0)
    points = [first + timedelta(hours=h) for h in range(hours + 1)]
    for n in range(0, len(points), 500):
        cw.put_metric_data(
            Namespace="AWS/SageMaker",
            MetricData=[
                {
                    "MetricName": "Invocations",
                    # In the order the scan's reader asks (moto matches dimensions in order).
                    "Dimensions": [
                        {"Name": "EndpointName", "Value": "ranker-prod"},
                        {"Name": "VariantName", "Value": "primary"},
                    ],
                    "Timestamp": at,
                    "Value": RANKER_TRAFFIC[0] if at < fell else RANKER_TRAFFIC[1],
                    "Unit": "None",
                }
                for at in points[n : n + 500]
            ],
        )


def _seed_eks(session: Any, ec2: Any, fleet: Fleet) -> None:
    eks = session.client("eks", region_name=PRIMARY)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    role = "arn:aws:iam::123456789012:role/eks"
    eks.create_cluster(
        name="vision-eks",
        roleArn=role,
        resourcesVpcConfig={"subnetIds": [subnet]},
        version="1.31",
        tags={Tags.PROJECT: "vision-research", Tags.OWNER: "U024BE7LH"},
    )
    eks.create_nodegroup(
        clusterName="vision-eks",
        nodegroupName="gpu-a10g",
        nodeRole=role,
        subnets=[subnet],
        instanceTypes=["g5.12xlarge"],
        scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": 3},
        tags={Tags.PROJECT: "vision-research"},
    )
    # Two of the three desired nodes are up; the instances carry only the EKS tags.
    node_tags = project_tags(**{Tags.EKS_CLUSTER: "vision-eks", Tags.EKS_NODEGROUP: "gpu-a10g"})
    for n, instance_id in enumerate(
        run_instances(ec2, "g5.12xlarge", node_tags, "us-east-1a", count=2)
    ):
        fleet.instances[f"eks-node-{n}"] = instance_id


def _seed_sagemaker(session: Any, fleet: Fleet) -> None:
    sm = session.client("sagemaker", region_name=PRIMARY)
    role = "arn:aws:iam::123456789012:role/sagemaker"
    serving = [
        {"Key": Tags.PROJECT, "Value": "recsys-serving"},
        {"Key": Tags.BUDGET, "Value": "15000"},
        {"Key": Tags.OWNER, "Value": "carol@example.com"},
    ]
    for name, itype, tags in (
        ("recsys-explore", "ml.p3.2xlarge", serving),
        ("nlp-scratch", "ml.t3.medium", [{"Key": Tags.PROJECT, "Value": "nlp-team"}]),
    ):
        sm.create_notebook_instance(
            NotebookInstanceName=name, InstanceType=itype, RoleArn=role, Tags=tags
        )
        fleet.notebooks.append(name)
    sm.create_model(
        ModelName="ranker",
        ExecutionRoleArn=role,
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ranker:1"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="ranker-v7",
        ProductionVariants=[
            {
                "VariantName": "primary",
                "ModelName": "ranker",
                "InitialInstanceCount": 2,
                "InstanceType": "ml.g4dn.2xlarge",
            }
        ],
    )
    sm.create_endpoint(EndpointName="ranker-prod", EndpointConfigName="ranker-v7", Tags=serving)
    fleet.endpoints.append("ranker-prod")


def install_spot_prices(prices: Mapping[tuple[str, str], Decimal], stamp: datetime) -> None:
    """Make moto's DescribeSpotPriceHistory answer with ``prices`` (demo only).

    moto answers every type with a static $0.00001 from 2006; CostGuard rightly
    rejects that as implausible. The demo publishes believable prices instead.
    """
    from moto.core.responses import ActionResult
    from moto.ec2.responses.spot_instances import SpotInstances

    def describe_spot_price_history(self: Any) -> Any:
        wanted = set(self._get_param("InstanceTypes", []))
        history = [
            {
                "InstanceType": itype,
                "ProductDescription": "Linux/UNIX",
                "SpotPrice": str(price),
                "AvailabilityZone": az,
                "Timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            }
            for (az, itype), price in prices.items()
            if az.startswith(self.region) and (not wanted or itype in wanted)
        ]
        return ActionResult({"SpotPriceHistory": history})

    SpotInstances.describe_spot_price_history = describe_spot_price_history  # type: ignore[method-assign]
