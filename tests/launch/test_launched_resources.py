"""One launched resource read back from AWS (moto): the adapter of the on-launch check."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.adapters.aws import ClientFactory
from costguard.adapters.launched import LaunchedResources
from costguard.adapters.sagemaker import PerResourceTags
from costguard.domain.models import ResourceKind
from costguard.ports import SourceError
from tests.support.clock import MIDDAY

ROLE = "arn:aws:iam::123456789012:role/x"
REGION = "us-east-1"


def reader(aws: Any) -> LaunchedResources:
    clients = ClientFactory(aws, account="123456789012")
    return LaunchedResources(clients, PerResourceTags(clients))


def run(aws: Any, itype: str, tags: dict[str, str] | None = None) -> str:
    ec2 = aws.client("ec2", region_name=REGION)
    spec = [
        {
            "ResourceType": "instance",
            "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
        }
    ]
    return str(
        ec2.run_instances(
            ImageId="ami-12c6146b",
            InstanceType=itype,
            MinCount=1,
            MaxCount=1,
            **({"TagSpecifications": spec} if tags else {}),
        )["Instances"][0]["InstanceId"]
    )


def test_an_instance_is_read_alone_with_its_tags_and_accelerator(aws: Any) -> None:
    instance = run(aws, "p5.48xlarge", {"costguard:project": "vision"})
    found = reader(aws).describe(ResourceKind.EC2_INSTANCE, REGION, instance)
    assert found is not None
    [res] = found.resources
    assert (res.id, res.instance_type, res.tags["costguard:project"]) == (
        instance,
        "p5.48xlarge",
        "vision",
    )
    assert res.accelerator is not None and res.account == "123456789012"


def test_a_cpu_instance_is_not_a_resource_to_judge(aws: Any) -> None:
    found = reader(aws).describe(ResourceKind.EC2_INSTANCE, REGION, run(aws, "t3.micro"))
    assert found is not None and found.resources == () and "no accelerator" in found.why


def test_a_gone_instance_or_notebook_is_none_not_an_error(aws: Any) -> None:
    r = reader(aws)
    assert r.describe(ResourceKind.EC2_INSTANCE, REGION, "i-0123456789abcdef0") is None
    assert r.describe(ResourceKind.SAGEMAKER_NOTEBOOK, REGION, "nobody") is None
    assert r.describe(ResourceKind.SAGEMAKER_TRAINING_JOB, REGION, "nobody") is None


def test_an_untagged_node_inherits_from_its_node_group(aws: Any) -> None:
    # GIVEN a node of an EKS managed node group tagged with a project; the node itself not
    ec2 = aws.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    eks = aws.client("eks", region_name=REGION)
    eks.create_cluster(name="ml", roleArn=ROLE, resourcesVpcConfig={"subnetIds": [subnet]})
    eks.create_nodegroup(
        clusterName="ml",
        nodegroupName="gpu",
        nodeRole=ROLE,
        subnets=[subnet],
        instanceTypes=["g5.12xlarge"],
        tags={"costguard:project": "cv"},
    )
    node = run(aws, "g5.12xlarge", {"eks:cluster-name": "ml", "eks:nodegroup-name": "gpu"})
    # WHEN read  THEN the node group comes with it, for the scan's attribution rule
    found = reader(aws).describe(ResourceKind.EC2_INSTANCE, REGION, node)
    assert found is not None
    [group] = found.parents
    assert (group.kind, group.tags["costguard:project"]) == (ResourceKind.EKS_NODEGROUP, "cv")


def test_notebook_training_job_and_endpoint_are_read_with_their_tags(aws: Any) -> None:
    sm = aws.client("sagemaker", region_name=REGION)
    tags = [{"Key": "costguard:project", "Value": "cv"}]
    sm.create_notebook_instance(
        NotebookInstanceName="nb", InstanceType="ml.p3.2xlarge", RoleArn=ROLE, Tags=tags
    )
    sm.create_training_job(
        TrainingJobName="job",
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        RoleArn=ROLE,
        OutputDataConfig={"S3OutputPath": "s3://b/o"},
        ResourceConfig={
            "InstanceType": "ml.p4d.24xlarge",
            "InstanceCount": 2,
            "VolumeSizeInGB": 50,
        },
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        Tags=tags,
    )
    sm.create_model(ModelName="m", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "img"})
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "a",
                "ModelName": "m",
                "InitialInstanceCount": 2,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sm.create_endpoint(EndpointName="ep", EndpointConfigName="c", Tags=tags)
    r = reader(aws)
    nb = r.describe(ResourceKind.SAGEMAKER_NOTEBOOK, REGION, "nb")
    job = r.describe(ResourceKind.SAGEMAKER_TRAINING_JOB, REGION, "job")
    ep = r.describe(ResourceKind.SAGEMAKER_ENDPOINT, REGION, "ep")
    assert nb and job and ep
    assert [
        (x.instance_type, x.count, x.tags["costguard:project"])
        for x in (*nb.resources, *job.resources, *ep.resources)
    ] == [
        ("ml.p3.2xlarge", 1, "cv"),
        ("ml.p4d.24xlarge", 2, "cv"),
        ("ml.g4dn.xlarge", 2, "cv"),
    ]


def test_a_refused_read_is_a_source_error_for_the_retry(aws: Any) -> None:
    # GIVEN a role that lacks ec2:DescribeInstances (an SCP, a missing permission)
    clients = ClientFactory(aws, account="123456789012")
    with Stubber(clients.ec2(REGION)) as stub:
        stub.add_client_error("describe_instances", "UnauthorizedOperation", http_status_code=403)
        # WHEN the launch's instance is read  THEN an error the Lambda retries, not "gone"
        with pytest.raises(SourceError) as raised:
            LaunchedResources(clients, PerResourceTags(clients)).describe(
                ResourceKind.EC2_INSTANCE, REGION, "i-0123456789abcdef0"
            )
    assert raised.value.code == "UnauthorizedOperation"


def test_the_launcher_lookup_is_best_effort(aws: Any) -> None:
    # GIVEN moto's CloudTrail, which records no event history
    instance = run(aws, "p5.48xlarge")
    found = reader(aws).describe(ResourceKind.EC2_INSTANCE, REGION, instance)
    assert found is not None
    # WHEN who launched it is asked  THEN "not known yet", never an exception
    assert reader(aws).launcher(found.resources[0], MIDDAY) is None
