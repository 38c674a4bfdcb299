"""EKS on moto; SageMaker notebooks/endpoints on moto, Studio and the tagging API on Stubber."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from botocore.stub import Stubber

from costguard.adapters.aws import ClientFactory
from costguard.adapters.eks import EksInventory
from costguard.adapters.sagemaker import PerResourceTags, SageMakerInventory, TaggingApiTags
from costguard.domain.findings import FindingCode
from costguard.domain.models import Lifecycle, ResourceKind
from tests.support.clock import MIDDAY

ROLE = "arn:aws:iam::123456789012:role/x"


def test_eks_cluster_and_node_group_with_scaling_and_tags(aws: Any) -> None:
    ec2 = aws.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
    eks = aws.client("eks", region_name="us-east-1")
    eks.create_cluster(
        name="ml",
        roleArn=ROLE,
        resourcesVpcConfig={"subnetIds": [subnet]},
        version="1.29",
        tags={"costguard:project": "platform"},
    )
    eks.create_nodegroup(
        clusterName="ml",
        nodegroupName="gpu",
        nodeRole=ROLE,
        subnets=[subnet],
        instanceTypes=["g5.12xlarge"],
        capacityType="SPOT",
        scalingConfig={"minSize": 0, "maxSize": 4, "desiredSize": 2},
        tags={"costguard:project": "cv"},
    )
    inv = EksInventory(ClientFactory(aws)).collect("us-east-1", MIDDAY)
    by_kind = {r.kind: r for r in inv.resources}
    cluster = by_kind[ResourceKind.EKS_CLUSTER]
    assert (cluster.id, cluster.version, cluster.tags["costguard:project"]) == (
        "ml",
        "1.29",
        "platform",
    )
    ng = by_kind[ResourceKind.EKS_NODEGROUP]
    assert (ng.id, ng.instance_type, ng.desired_size, ng.lifecycle) == (
        "ml/gpu",
        "g5.12xlarge",
        2,
        Lifecycle.SPOT,
    )
    assert ng.tags["costguard:project"] == "cv"


def test_notebooks_and_endpoint_variants_with_per_resource_tags(aws: Any) -> None:
    sm = aws.client("sagemaker", region_name="us-east-1")
    sm.create_notebook_instance(
        NotebookInstanceName="nb",
        InstanceType="ml.p3.2xlarge",
        RoleArn=ROLE,
        Tags=[{"Key": "costguard:project", "Value": "cv"}],
    )
    sm.create_model(
        ModelName="m",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/m:1"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "a",
                "ModelName": "m",
                "InitialInstanceCount": 3,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sm.create_endpoint(
        EndpointName="ep",
        EndpointConfigName="c",
        Tags=[{"Key": "costguard:project", "Value": "serving"}],
    )
    factory = ClientFactory(aws)
    inv = SageMakerInventory(factory, PerResourceTags(factory), studio=False).collect(
        "us-east-1", MIDDAY
    )
    found = {r.kind: r for r in inv.resources}
    nb = found[ResourceKind.SAGEMAKER_NOTEBOOK]
    assert (nb.id, nb.instance_type, nb.tags["costguard:project"]) == ("nb", "ml.p3.2xlarge", "cv")
    ep = found[ResourceKind.SAGEMAKER_ENDPOINT]
    assert (ep.id, ep.instance_type, ep.count, ep.tags["costguard:project"]) == (
        "ep/a",
        "ml.g4dn.xlarge",
        3,
        "serving",
    )
    # its configuration dates from the later of its last update and its config's creation
    detail = sm.describe_endpoint(EndpointName="ep")
    config = sm.describe_endpoint_config(EndpointConfigName="c")
    assert ep.launched_at == detail["CreationTime"]
    assert ep.config_since == max(detail["LastModifiedTime"], config["CreationTime"])


def test_studio_apps_are_priced_units_and_tagged_through_their_space(aws: Any) -> None:
    factory = ClientFactory(aws)
    sm = factory("sagemaker", "us-east-1")
    tagging = factory("resourcegroupstaggingapi", "us-east-1")
    apps = [
        {
            "DomainId": "d-1",
            "SpaceName": "alice-space",
            "AppType": "JupyterLab",
            "AppName": "default",
            "Status": "InService",
            "CreationTime": MIDDAY - timedelta(hours=3),
            "ResourceSpec": {"InstanceType": "ml.g5.xlarge"},
        },
        {
            "DomainId": "d-1",
            "UserProfileName": "bob",
            "AppType": "JupyterServer",
            "AppName": "default",
            "Status": "InService",
            "ResourceSpec": {"InstanceType": "system"},
        },
        {
            "DomainId": "d-1",
            "SpaceName": "old",
            "AppType": "CodeEditor",
            "AppName": "default",
            "Status": "Deleted",
            "ResourceSpec": {"InstanceType": "ml.g5.2xlarge"},
        },
    ]
    with Stubber(sm) as sm_stub, Stubber(tagging) as tag_stub:
        sm_stub.add_response("list_notebook_instances", {"NotebookInstances": []})
        sm_stub.add_response("list_endpoints", {"Endpoints": []})
        sm_stub.add_response("list_training_jobs", {"TrainingJobSummaries": []})
        sm_stub.add_response("list_apps", {"Apps": apps})
        tag_stub.add_response(
            "get_resources",
            {
                "ResourceTagMappingList": [
                    {
                        "ResourceARN": "arn:aws:sagemaker:us-east-1:123456789012:space/d-1/alice-space",
                        "Tags": [{"Key": "costguard:project", "Value": "research"}],
                    }
                ]
            },
        )
        inv = SageMakerInventory(factory, TaggingApiTags(factory)).collect("us-east-1", MIDDAY)
    (app,) = inv.resources
    assert app.kind is ResourceKind.SAGEMAKER_STUDIO_APP
    assert (app.instance_type, app.tags["costguard:project"]) == ("ml.g5.xlarge", "research")


def test_one_failing_sagemaker_api_does_not_hide_the_others(aws: Any) -> None:
    sm = aws.client("sagemaker", region_name="us-east-1")
    sm.create_notebook_instance(
        NotebookInstanceName="nb", InstanceType="ml.t3.medium", RoleArn=ROLE
    )
    factory = ClientFactory(aws)
    client = factory("sagemaker", "us-east-1")
    with Stubber(client) as stub:
        stub.add_response(
            "list_notebook_instances",
            {
                "NotebookInstances": [
                    {
                        "NotebookInstanceName": "nb",
                        "NotebookInstanceArn": "arn:aws:sagemaker:us-east-1:123456789012:notebook-instance/nb",
                        "InstanceType": "ml.t3.medium",
                        "NotebookInstanceStatus": "InService",
                    }
                ]
            },
        )
        stub.add_client_error("list_endpoints", "AccessDeniedException", "no")
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": []})
        stub.add_client_error("list_apps", "ThrottlingException", "slow down")
        stub.add_response("list_tags", {"Tags": []})
        inv = SageMakerInventory(factory, PerResourceTags(factory)).collect("us-east-1", MIDDAY)
    assert [r.id for r in inv.resources] == ["nb"]
    assert sorted(f.resource for f in inv.findings) == [
        "us-east-1/sagemaker/endpoints",
        "us-east-1/sagemaker/studio-apps",
    ]
    assert all(f.code is FindingCode.SCAN_FAILED for f in inv.findings)


def test_in_progress_training_jobs_count_every_instance(aws: Any) -> None:
    factory = ClientFactory(aws)
    sm = factory("sagemaker", "us-east-1")
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/llama-ft-7"
    with Stubber(sm) as stub:
        stub.add_response("list_notebook_instances", {"NotebookInstances": []})
        stub.add_response("list_endpoints", {"Endpoints": []})
        stub.add_response(
            "list_training_jobs",
            {
                "TrainingJobSummaries": [
                    {
                        "TrainingJobName": "llama-ft-7",
                        "TrainingJobArn": arn,
                        "CreationTime": MIDDAY,
                        "TrainingJobStatus": "InProgress",
                    }
                ]
            },
        )
        stub.add_response(
            "describe_training_job",
            {
                "TrainingJobName": "llama-ft-7",
                "TrainingJobArn": arn,
                "TrainingJobStatus": "InProgress",
                "SecondaryStatus": "Training",
                "CreationTime": MIDDAY,
                "TrainingStartTime": MIDDAY - timedelta(hours=2),
                "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "x"},
                "ResourceConfig": {
                    "InstanceType": "ml.p4d.24xlarge",
                    "InstanceCount": 2,
                    "VolumeSizeInGB": 100,
                },
                "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
                "EnableManagedSpotTraining": True,
                "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m"},
            },
        )
        stub.add_response("list_tags", {"Tags": [{"Key": "costguard:project", "Value": "llm"}]})
        inv = SageMakerInventory(factory, PerResourceTags(factory), studio=False).collect(
            "us-east-1", MIDDAY
        )
    (job,) = inv.resources
    assert (job.kind, job.instance_type, job.count, job.lifecycle) == (
        ResourceKind.SAGEMAKER_TRAINING_JOB,
        "ml.p4d.24xlarge",
        2,
        Lifecycle.SPOT,
    )
    assert job.tags == {"costguard:project": "llm"}
    assert job.launched_at == MIDDAY - timedelta(hours=2)


def test_an_endpoint_update_is_not_a_restart(aws: Any) -> None:
    # GIVEN an endpoint created three days ago and scaled up five minutes ago
    factory = ClientFactory(aws)
    sm = factory("sagemaker", "us-east-1")
    created, updated = MIDDAY - timedelta(days=3), MIDDAY - timedelta(minutes=5)
    arn = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/llm"
    with Stubber(sm) as stub:
        stub.add_response("list_notebook_instances", {"NotebookInstances": []})
        stub.add_response(
            "list_endpoints",
            {
                "Endpoints": [
                    {
                        "EndpointName": "llm",
                        "EndpointArn": arn,
                        "CreationTime": created,
                        "LastModifiedTime": updated,
                        "EndpointStatus": "InService",
                    }
                ]
            },
        )
        stub.add_response(
            "describe_endpoint",
            {
                "EndpointName": "llm",
                "EndpointArn": arn,
                "EndpointConfigName": "llm-2",
                "EndpointStatus": "InService",
                "CreationTime": created,
                "LastModifiedTime": updated,
                "ProductionVariants": [
                    {"VariantName": "main", "CurrentInstanceCount": 3, "DesiredInstanceCount": 3}
                ],
            },
        )
        stub.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "llm-2",
                "EndpointConfigArn": arn + "-config",
                "CreationTime": updated,
                "ProductionVariants": [
                    {"VariantName": "main", "ModelName": "m", "InstanceType": "ml.g5.2xlarge"}
                ],
            },
        )
        stub.add_response("list_training_jobs", {"TrainingJobSummaries": []})
        stub.add_response("list_tags", {"Tags": []})
        inv = SageMakerInventory(factory, PerResourceTags(factory), studio=False).collect(
            "us-east-1", MIDDAY
        )
    (endpoint,) = inv.resources
    # THEN it has billed since it was created: the ledger must not cut the interval
    assert endpoint.launched_at == created
    assert endpoint.count == 3


def test_serverless_variants_are_unpriced_findings_and_async_ones_are_marked(aws: Any) -> None:
    """GIVEN an endpoint with a serverless variant and one with an asynchronous config on moto
    WHEN SageMaker is inventoried
    THEN the serverless variant is no resource but an unpriced finding saying why (never $0),
    and the asynchronous variant is an instance-backed resource marked asynchronous."""
    from costguard.domain.predictions import SERVERLESS_UNPRICED

    sm = aws.client("sagemaker", region_name="us-east-1")
    role = "arn:aws:iam::123456789012:role/sagemaker"
    sm.create_model(ModelName="m", ExecutionRoleArn=role, PrimaryContainer={"Image": "x:1"})
    sm.create_endpoint_config(
        EndpointConfigName="tiny-config",
        ProductionVariants=[
            {
                "VariantName": "primary",
                "ModelName": "m",
                "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 5},
            }
        ],
    )
    sm.create_endpoint(EndpointName="tiny", EndpointConfigName="tiny-config")
    sm.create_endpoint_config(
        EndpointConfigName="batch-config",
        ProductionVariants=[
            {
                "VariantName": "primary",
                "ModelName": "m",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
        AsyncInferenceConfig={"OutputConfig": {"S3OutputPath": "s3://out/"}},
    )
    sm.create_endpoint(EndpointName="batch", EndpointConfigName="batch-config")
    clients = ClientFactory(aws)
    found = SageMakerInventory(clients, PerResourceTags(clients), studio=False).collect(
        "us-east-1", MIDDAY
    )
    (batch,) = [r for r in found.resources if r.kind.value == "sagemaker-endpoint"]
    assert batch.id == "batch/primary" and batch.asynchronous
    (unpriced,) = [f for f in found.findings if f.code is FindingCode.UNPRICED]
    assert unpriced.resource.endswith("us-east-1/sagemaker-endpoint/tiny/primary")
    assert "2048 MB" in unpriced.message and SERVERLESS_UNPRICED in unpriced.message
