"""SageMaker Studio for the idle-notebook guard: running apps, their last user activity,
and the domains and spaces that have no built-in idle shutdown.

Calls per region and pass: ``ListApps`` (one page per 100 apps), then for each
InService JupyterLab or CodeEditor app created before ``created_before``: one
``DescribeApp`` (the only call that returns ``LastUserActivityTimestamp``; ``ListApps``
does not) and one ``ListTags`` (the app's tags are what IAM checks before ``DeleteApp``),
plus one ``ListTags`` per space (its live ``costguard:exempt``). Apps younger than the
idle window cannot have been idle for all of it, so passing ``created_before`` skips
their reads: the calls grow with the apps old enough to judge, not with every app.

moto has no Studio (ListApps, DescribeApp, ListSpaces): tests use botocore's Stubber.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from costguard.adapters.aws import ClientFor, reading, tags_of
from costguard.adapters.sagemaker_actuator import space_arn, with_space_exemption
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.studio import IDLE_APP_TYPES, StudioApp
from costguard.domain.tags import Tags
from costguard.iam import Permission

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

ENABLED = "ENABLED"

STUDIO_READS = (
    Permission(
        ("sagemaker:ListApps", "sagemaker:ListDomains", "sagemaker:ListSpaces"),
        "list Studio apps, domains and spaces; List* calls have no resource-level permissions",
    ),
    Permission(
        ("sagemaker:DescribeApp", "sagemaker:DescribeDomain", "sagemaker:ListTags"),
        "read apps' last user activity and tags, spaces' exemptions, and domains' idle "
        "shutdown settings in this account",
        resources=(
            "arn:{partition}:sagemaker:*:{account}:app/*",
            "arn:{partition}:sagemaker:*:{account}:space/*",
            "arn:{partition}:sagemaker:*:{account}:domain/*",
        ),
    ),
)
"""What :class:`StudioInventory` calls: for the idle-notebook guard's ``reads``."""


class StudioInventory:
    def __init__(self, clients: ClientFor) -> None:
        self._clients = clients

    def _sm(self, region: str) -> SageMakerClient:
        return self._clients.sagemaker(region)

    def apps(self, region: str, created_before: datetime | None = None) -> list[StudioApp]:
        """InService JupyterLab and CodeEditor apps of spaces, with their last activity.

        An app created at or after ``created_before`` is returned without its reads
        (``last_user_activity`` None, no tags): unknown, which is never idle.
        """
        sm = self._sm(region)
        with reading("sagemaker", region, "ListApps"):
            listed = [
                app
                for page in sm.get_paginator("list_apps").paginate()
                for app in page.get("Apps", [])
                if app.get("Status") == "InService"
                and app.get("AppType") in IDLE_APP_TYPES
                and app.get("SpaceName")
            ]
        space_exempt: dict[tuple[str, str], str | None] = {}
        found: list[StudioApp] = []
        for app in listed:
            created = app.get("CreationTime")
            young = created_before is not None and (created is None or created >= created_before)
            base = StudioApp(
                domain_id=str(app["DomainId"]),
                space_name=str(app["SpaceName"]),
                app_type=str(app["AppType"]),
                app_name=str(app["AppName"]),
                arn="",
                region=region,
                status="InService",
                instance_type=(app.get("ResourceSpec") or {}).get("InstanceType"),
                created=created,
                last_user_activity=None,
            )
            if young:
                found.append(base)
                continue
            with reading("sagemaker", region, "DescribeApp"):
                detail = sm.describe_app(
                    DomainId=base.domain_id,
                    SpaceName=base.space_name,
                    AppType=app["AppType"],
                    AppName=base.app_name,
                )
            arn = str(detail.get("AppArn", ""))
            tags = self._tags(sm, region, arn) if arn else {}
            key = (base.domain_id, base.space_name)
            if arn and key not in space_exempt:
                space_exempt[key] = self._tags(sm, region, space_arn(arn)).get(Tags.EXEMPT)
            found.append(
                StudioApp(
                    domain_id=base.domain_id,
                    space_name=base.space_name,
                    app_type=base.app_type,
                    app_name=base.app_name,
                    arn=arn,
                    region=region,
                    status=str(detail.get("Status", "InService")),
                    instance_type=(detail.get("ResourceSpec") or {}).get("InstanceType")
                    or base.instance_type,
                    created=detail.get("CreationTime") or created,
                    last_user_activity=detail.get("LastUserActivityTimestamp"),
                    tags=with_space_exemption(tags, space_exempt.get(key)),
                )
            )
        return found

    @staticmethod
    def _tags(sm: SageMakerClient, region: str, arn: str) -> dict[str, str]:
        with reading("sagemaker", region, "ListTags"):
            return tags_of(
                t
                for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn)
                for t in page.get("Tags", [])
            )

    def idle_shutdown_gaps(self, region: str) -> list[Finding]:
        """Domains and spaces where Studio's own idle shutdown is not turned on.

        Studio stops idle JupyterLab and CodeEditor apps itself when a domain enables
        ``AppLifecycleManagement.IdleSettings.LifecycleManagement``: private spaces follow
        ``DefaultUserSettings``, shared spaces ``DefaultSpaceSettings`` (JupyterLab). A
        space can only choose a timeout within the domain's bounds, never turn it off, so
        spaces are read from ``ListSpaces`` (which carries their app type and sharing)
        without a ``DescribeSpace`` each. A user profile can enable it for its own private
        spaces; that is not read here (one call per user), so such spaces may be reported.
        """
        sm = self._sm(region)
        with reading("sagemaker", region, "ListDomains"):
            domains = [
                d
                for page in sm.get_paginator("list_domains").paginate()
                for d in page.get("Domains", [])
                if d.get("Status") == "InService"
            ]
        findings: list[Finding] = []
        for summary in domains:
            domain_id = str(summary["DomainId"])
            with reading("sagemaker", region, "DescribeDomain"):
                domain = sm.describe_domain(DomainId=domain_id)
            off = _switched_off(domain)
            where = f"{region}/sagemaker-domain/{domain_id}"
            name = domain.get("DomainName") or domain_id
            if off:
                findings.append(
                    Finding(
                        FindingCode.STUDIO_IDLE_SHUTDOWN_OFF,
                        where,
                        f"Studio domain {name} does not shut down idle apps itself for "
                        f"{', '.join(sorted(off))}: enable AppLifecycleManagement idle "
                        "settings (LifecycleManagement=ENABLED, an IdleTimeoutInMinutes) so "
                        "that an idle app stops even between CostGuard's runs",
                    )
                )
            if domain.get("TagPropagation") != ENABLED:
                findings.append(
                    Finding(
                        FindingCode.STUDIO_TAGS_NOT_PROPAGATED,
                        where,
                        f"Studio domain {name} does not propagate its spaces' tags to their "
                        f"apps (TagPropagation): CostGuard acts only on apps whose own tags "
                        f"carry {Tags.PROJECT}, so idle apps here are reported, not stopped",
                        Severity.INFO,
                    )
                )
            if not off:
                continue
            with reading("sagemaker", region, "ListSpaces"):
                spaces = [
                    s
                    for page in sm.get_paginator("list_spaces").paginate(DomainIdEquals=domain_id)
                    for s in page.get("Spaces", [])
                ]
            for space in spaces:
                kind = _space_kind(space)
                if kind is not None and kind in off:
                    findings.append(
                        Finding(
                            FindingCode.STUDIO_IDLE_SHUTDOWN_OFF,
                            f"{region}/sagemaker-space/{domain_id}/{space['SpaceName']}",
                            f"Studio space {space['SpaceName']} ({kind}) has no idle "
                            f"shutdown: its domain {name} does not enable it",
                        )
                    )
        return findings


def _enabled(settings: Mapping[str, Any] | None) -> bool:
    idle = ((settings or {}).get("AppLifecycleManagement") or {}).get("IdleSettings") or {}
    return idle.get("LifecycleManagement") == ENABLED


def _switched_off(domain: Mapping[str, Any]) -> set[str]:
    """Which kinds of space have no idle shutdown in this domain."""
    user = domain.get("DefaultUserSettings") or {}
    shared = domain.get("DefaultSpaceSettings") or {}
    checks: Iterable[tuple[str, Mapping[str, Any] | None]] = (
        ("private JupyterLab spaces", user.get("JupyterLabAppSettings")),
        ("private CodeEditor spaces", user.get("CodeEditorAppSettings")),
        ("shared JupyterLab spaces", shared.get("JupyterLabAppSettings")),
        # Shared spaces have no CodeEditor defaults of their own: the user defaults apply.
        ("shared CodeEditor spaces", user.get("CodeEditorAppSettings")),
    )
    return {label for label, settings in checks if not _enabled(settings)}


def _space_kind(space: Mapping[str, Any]) -> str | None:
    app_type = (space.get("SpaceSettingsSummary") or {}).get("AppType")
    if app_type not in IDLE_APP_TYPES:
        return None
    sharing = (space.get("SpaceSharingSettingsSummary") or {}).get("SharingType")
    return f"{'shared' if sharing == 'Shared' else 'private'} {app_type} spaces"
