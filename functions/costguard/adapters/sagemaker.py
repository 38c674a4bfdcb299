"""SageMaker compute: notebook instances, real-time endpoints, training jobs, Studio apps.

SageMaker's list calls carry no tags. Tags come from a :class:`TagReader`: the
Resource Groups Tagging API (one paginated call for all SageMaker resources of a
region; the default) or ``ListTags`` per resource (for endpoints that lack the
tagging API, such as moto).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from costguard.adapters.aws import ClientFor, reading
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.lifetime import TrainingJob
from costguard.domain.models import (
    Lifecycle,
    Resource,
    ResourceKind,
    resource_key,
)
from costguard.domain.predictions import SERVERLESS_UNPRICED
from costguard.ports import Inventory, SourceError

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker.type_defs import AppDetailsTypeDef

STUDIO_BILLED_APPS = frozenset({"JupyterLab", "CodeEditor", "KernelGateway", "RStudioServerPro"})
TAGGED_TYPES = (
    "sagemaker:notebook-instance",
    "sagemaker:endpoint",
    "sagemaker:training-job",
    "sagemaker:user-profile",
    "sagemaker:space",
)


class TagReader(Protocol):
    def tags(self, region: str, arns: Sequence[str]) -> dict[str, dict[str, str]]:
        """Tags per ARN; an ARN missing from the result has no tags."""
        ...


class TaggingApiTags:
    """All SageMaker tags of a region in pages of 100 (``tag:GetResources``)."""

    def __init__(self, client_for: ClientFor) -> None:
        self._client_for = client_for

    def tags(self, region: str, arns: Sequence[str]) -> dict[str, dict[str, str]]:
        client = self._client_for.tagging(region)
        found: dict[str, dict[str, str]] = {}
        with reading("tag", region, "GetResources"):
            for page in client.get_paginator("get_resources").paginate(
                ResourceTypeFilters=list(TAGGED_TYPES)
            ):
                for item in page.get("ResourceTagMappingList", []):
                    found[str(item["ResourceARN"])] = {
                        str(t["Key"]): str(t.get("Value", "")) for t in item.get("Tags", [])
                    }
        return found


class PerResourceTags:
    """``sagemaker:ListTags`` once per resource: for moto and other partial endpoints."""

    def __init__(self, client_for: ClientFor) -> None:
        self._client_for = client_for

    def tags(self, region: str, arns: Sequence[str]) -> dict[str, dict[str, str]]:
        sm = self._client_for.sagemaker(region)
        found: dict[str, dict[str, str]] = {}
        for arn in (a for a in arns if a.startswith("arn:")):
            with reading("sagemaker", region, "ListTags"):
                pages = sm.get_paginator("list_tags").paginate(ResourceArn=arn)
                found[arn] = {
                    str(t["Key"]): str(t.get("Value", "")) for p in pages for t in p.get("Tags", [])
                }
        return found


def tag_reader(client_for: ClientFor, how: str) -> TagReader:
    """The deployment's way of reading SageMaker tags (``sagemakerTags``): the tagging API,
    or one ``ListTags`` per resource."""
    return TaggingApiTags(client_for) if how == "tagging-api" else PerResourceTags(client_for)


def resource_part(arn: str) -> str:
    """``arn:aws:sagemaker:r:acct:space/d/s`` -> ``space/d/s``: matches across accounts' ARNs."""
    parts = arn.split(":", 5)
    return parts[5] if len(parts) == 6 else arn


def _studio_owner(app: AppDetailsTypeDef) -> str:
    """Studio apps are tagged through the space or user profile that owns them."""
    if app.get("SpaceName"):
        return f"space/{app['DomainId']}/{app['SpaceName']}"
    return f"user-profile/{app['DomainId']}/{app.get('UserProfileName', '')}"


Pending = list[tuple[str, Resource]]
"""(ARN or ARN resource part to read tags by, the resource without its tags)"""


def endpoint_variants(detail: Any, config: Any, region: str) -> list[Resource]:
    """An endpoint's instance-backed variants (DescribeEndpoint and its config), without tags."""
    types = {v["VariantName"]: v.get("InstanceType") for v in config.get("ProductionVariants", [])}
    # UpdateEndpoint to a new config keeps the endpoint and its variant names but may change
    # the instance type: the current configuration dates from the later of the endpoint's
    # last update and the config's creation (either missing: unknown, and the endpoint gets
    # no utilization advice).
    modified, created = detail.get("LastModifiedTime"), config.get("CreationTime")
    config_since = max(modified, created) if modified and created else None
    asynchronous = bool(config.get("AsyncInferenceConfig"))
    found: list[Resource] = []
    for variant in detail.get("ProductionVariants") or []:
        itype = types.get(variant["VariantName"])
        if not itype:
            continue  # serverless variants bill per GB-second: serverless_findings says so
        count = variant.get("CurrentInstanceCount")
        if count is None:
            count = variant.get("DesiredInstanceCount", 1)
        found.append(
            Resource(
                id=f"{detail['EndpointName']}/{variant['VariantName']}",
                kind=ResourceKind.SAGEMAKER_ENDPOINT,
                region=region,
                instance_type=itype,
                count=int(count),
                # An update (capacity, weights, a new config) is not a restart: the
                # endpoint has billed since it was created.
                launched_at=detail.get("CreationTime"),
                config_since=config_since,
                state=str(detail.get("EndpointStatus") or "InService"),
                name=str(detail["EndpointName"]),
                asynchronous=asynchronous,
            )
        )
    return found


def serverless_findings(detail: Any, config: Any, region: str, account: str) -> list[Finding]:
    """An endpoint's serverless variants, each unpriced with the reason: the price catalog
    carries no per-GB-second or per-GB-processed rate, so their spend is unknown, not $0."""
    found = []
    for variant in config.get("ProductionVariants", []):
        serverless = variant.get("ServerlessConfig")
        if variant.get("InstanceType") or not serverless:
            continue
        rid = f"{detail['EndpointName']}/{variant['VariantName']}"
        memory = serverless.get("MemorySizeInMB")
        found.append(
            Finding(
                FindingCode.UNPRICED,
                resource_key(account, region, ResourceKind.SAGEMAKER_ENDPOINT, rid),
                f"serverless variant ({memory} MB) is not priced: {SERVERLESS_UNPRICED}",
                Severity.WARNING,
            )
        )
    return found


def training_job_resource(detail: Any, region: str) -> Resource:
    """A training job as DescribeTrainingJob gives it, without tags."""
    rc = detail.get("ResourceConfig") or {}
    return Resource(
        id=str(detail["TrainingJobName"]),
        kind=ResourceKind.SAGEMAKER_TRAINING_JOB,
        region=region,
        instance_type=rc.get("InstanceType"),
        count=int(rc.get("InstanceCount", 1)),
        lifecycle=Lifecycle.SPOT
        if detail.get("EnableManagedSpotTraining")
        else Lifecycle.ON_DEMAND,
        launched_at=detail.get("TrainingStartTime") or detail.get("CreationTime"),
        state=str(detail.get("TrainingJobStatus") or "InProgress"),
    )


class SageMakerInventory:
    """Each kind of SageMaker compute is read on its own: if one API fails (Studio in
    a region without domains, a missing permission), the others still count."""

    name = "sagemaker"

    def __init__(
        self, client_for: ClientFor, tag_reader: TagReader, *, studio: bool = True
    ) -> None:
        self._client_for = client_for
        self._tag_reader = tag_reader
        self._studio = studio

    def collect(self, region: str, now: datetime) -> Inventory:
        sm = self._client_for.sagemaker(region)
        serverless: list[Finding] = []
        parts: list[tuple[str, Callable[[SageMakerClient, str], Pending]]] = [
            ("notebook instances", self._notebooks),
            (
                "endpoints",
                partial(self._endpoints, serverless=serverless, account=self._client_for.account),
            ),
            ("training jobs", self._training_jobs),
        ]
        if self._studio:
            parts.append(("studio apps", self._studio_apps))
        pending: Pending = []
        findings: list[Finding] = []
        for label, read in parts:
            try:
                pending.extend(read(sm, region))
            except SourceError as exc:
                findings.append(
                    Finding(
                        FindingCode.SCAN_FAILED,
                        f"{region}/sagemaker/{label.replace(' ', '-')}",
                        f"{exc.operation} failed with {exc.code}: {exc.detail or 'no message'}; "
                        f"SageMaker {label} in {region} are missing from this scan",
                        Severity.ERROR,
                    )
                )
        # Studio apps are known by ARN resource part only (their account is not in
        # ListApps); a full ARN is rebuilt from any other SageMaker ARN of the region.
        full = [arn for arn, _ in pending if arn.startswith("arn:")]
        prefix = full[0].rsplit(":", 1)[0] + ":" if full else ""
        refs = sorted({ref if ref.startswith("arn:") else prefix + ref for ref, _ in pending})
        by_part = (
            {resource_part(arn): tags for arn, tags in self._tag_reader.tags(region, refs).items()}
            if refs
            else {}
        )
        resources = tuple(
            replace(
                found,
                tags=by_part.get(resource_part(ref), {}),
                account=self._client_for.account,
            )
            for ref, found in pending
        )
        findings += serverless
        return Inventory(resources, tuple(findings))

    @staticmethod
    def _notebooks(sm: SageMakerClient, region: str) -> Pending:
        pending: Pending = []
        with reading("sagemaker", region, "ListNotebookInstances"):
            for page in sm.get_paginator("list_notebook_instances").paginate(
                StatusEquals="InService"
            ):
                for nb in page.get("NotebookInstances", []):
                    pending.append(
                        (
                            str(nb["NotebookInstanceArn"]),
                            Resource(
                                id=str(nb["NotebookInstanceName"]),
                                kind=ResourceKind.SAGEMAKER_NOTEBOOK,
                                region=region,
                                instance_type=nb.get("InstanceType"),
                                # An InService notebook was last modified when it last started.
                                launched_at=nb.get("LastModifiedTime") or nb.get("CreationTime"),
                                state="InService",
                            ),
                        )
                    )
        return pending

    @staticmethod
    def _endpoints(
        sm: SageMakerClient,
        region: str,
        serverless: list[Finding] | None = None,
        account: str = "",
    ) -> Pending:
        pending: Pending = []
        with reading("sagemaker", region, "ListEndpoints"):
            endpoints = [
                e
                for page in sm.get_paginator("list_endpoints").paginate(StatusEquals="InService")
                for e in page.get("Endpoints", [])
            ]
        for ep in endpoints:
            with reading("sagemaker", region, "DescribeEndpoint"):
                detail = sm.describe_endpoint(EndpointName=ep["EndpointName"])
            with reading("sagemaker", region, "DescribeEndpointConfig"):
                config = sm.describe_endpoint_config(
                    EndpointConfigName=detail["EndpointConfigName"]
                )
            arn = str(ep["EndpointArn"])
            pending.extend((arn, r) for r in endpoint_variants(detail, config, region))
            if serverless is not None:
                serverless.extend(serverless_findings(detail, config, region, account))
        return pending

    @staticmethod
    def _training_jobs(sm: SageMakerClient, region: str) -> Pending:
        pending: Pending = []
        with reading("sagemaker", region, "ListTrainingJobs"):
            jobs = [
                j
                for page in sm.get_paginator("list_training_jobs").paginate(
                    StatusEquals="InProgress"
                )
                for j in page.get("TrainingJobSummaries", [])
            ]
        for job in jobs:
            with reading("sagemaker", region, "DescribeTrainingJob"):
                detail = sm.describe_training_job(TrainingJobName=job["TrainingJobName"])
            pending.append((str(job["TrainingJobArn"]), training_job_resource(detail, region)))
        return pending

    @staticmethod
    def _studio_apps(sm: SageMakerClient, region: str) -> Pending:
        pending: Pending = []
        with reading("sagemaker", region, "ListApps"):
            for page in sm.get_paginator("list_apps").paginate():
                for app in page.get("Apps", []):
                    itype = (app.get("ResourceSpec") or {}).get("InstanceType")
                    if (
                        app.get("Status") != "InService"
                        or app.get("AppType") not in STUDIO_BILLED_APPS
                    ):
                        continue
                    if not itype or itype == "system":
                        continue
                    owner = app.get("SpaceName") or app.get("UserProfileName") or ""
                    pending.append(
                        (
                            _studio_owner(app),
                            Resource(
                                id=f"{app.get('DomainId', '')}/{owner}/{app.get('AppType', '')}/{app.get('AppName', '')}",
                                kind=ResourceKind.SAGEMAKER_STUDIO_APP,
                                region=region,
                                instance_type=itype,
                                launched_at=app.get("CreationTime"),
                                state="InService",
                                name=app.get("AppName"),
                            ),
                        )
                    )
        return pending


class TrainingJobSource:
    """InProgress training jobs with their start and tags, for the maximum-lifetime guard:
    the scan's own listing (``ListTrainingJobs``, one ``DescribeTrainingJob`` each), then
    their tags through the deployment's :class:`TagReader`."""

    def __init__(self, client_for: ClientFor, tag_reader: TagReader) -> None:
        self._client_for = client_for
        self._tag_reader = tag_reader

    def in_progress(self, region: str) -> list[TrainingJob]:
        listed = SageMakerInventory._training_jobs(self._client_for.sagemaker(region), region)
        if not listed:
            return []
        tags = self._tag_reader.tags(region, [arn for arn, _ in listed])
        return [
            TrainingJob(
                name=r.id,
                arn=arn,
                region=region,
                instance_type=r.instance_type,
                instance_count=r.count,
                started_at=r.launched_at,
                tags=tags.get(arn, {}),
            )
            for arn, r in listed
        ]
