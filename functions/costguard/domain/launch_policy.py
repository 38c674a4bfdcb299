"""A project's launch policy, and a running resource's breaches of it: a $/h above the
project's limit, on-demand capacity where the project requires spot, a region the deployment
does not allow. One ``launch-policy`` alert per launch and cause, whether the launch event
or the scan finds it first (the same claims). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum

from costguard.domain.alerts import (
    Alert,
    AlertKind,
    AlertResource,
    AlertSeverity,
    money_severity,
)
from costguard.domain.attribution import ProjectConfig
from costguard.domain.calendar import require_utc
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.money import ZERO, per_hour
from costguard.domain.tags import Tags, parse_flag, parse_usd_per_hour
from costguard.domain.text import truncate

# -- the project's policy ------------------------------------------------------------------


class Cause(StrEnum):
    """Why a launch is outside its project's policy: one claim each."""

    USD_PER_HOUR = "usd-per-hour"
    SPOT = "spot"
    REGION = "region"


#: The kinds a launch policy judges: what runs on accelerators by the hour.
POLICY_KINDS = frozenset(
    {
        ResourceKind.EC2_INSTANCE,
        ResourceKind.SAGEMAKER_NOTEBOOK,
        ResourceKind.SAGEMAKER_ENDPOINT,
        ResourceKind.SAGEMAKER_TRAINING_JOB,
    }
)
#: The kinds that can run on spot capacity (a notebook or an endpoint cannot).
SPOT_KINDS = frozenset({ResourceKind.EC2_INSTANCE, ResourceKind.SAGEMAKER_TRAINING_JOB})


@dataclass(frozen=True, slots=True)
class LaunchPolicy:
    """The deployment's defaults; a project's own limits override them."""

    #: 0: no deployment-wide limit.
    max_usd_per_hour: Decimal = ZERO
    #: Empty: every region.
    regions: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ProjectPolicy:
    max_usd_per_hour: Decimal | None = None
    #: Where the limit comes from: "table", "tag" or "deployment".
    limit_source: str = ""
    require_spot: bool = False
    regions: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class PolicyTags:
    """What one resource's policy tags say, and what was wrong with them."""

    max_usd_per_hour: Decimal | None = None
    require_spot: bool = False
    findings: tuple[Finding, ...] = ()


def read_policy_tags(resource_ref: str, tags: Mapping[str, str]) -> PolicyTags:
    """``costguard:max-usd-per-hour`` and ``costguard:require-spot``; a malformed value is a
    finding naming the resource and the tag, and says nothing."""
    limit: Decimal | None = None
    spot = False
    findings: list[Finding] = []
    raw = tags.get(Tags.MAX_USD_PER_HOUR)
    if raw is not None:
        parsed = parse_usd_per_hour(raw)
        if isinstance(parsed, str):
            findings.append(
                Finding(
                    FindingCode.MALFORMED_USD_PER_HOUR,
                    resource_ref,
                    f"tag {Tags.MAX_USD_PER_HOUR}={truncate(raw, 60)!r} {parsed}; no limit is read from it",
                )
            )
        else:
            limit = parsed
    raw = tags.get(Tags.REQUIRE_SPOT)
    if raw is not None:
        flag = parse_flag(raw)
        if isinstance(flag, str):
            findings.append(
                Finding(
                    FindingCode.MALFORMED_REQUIRE_SPOT,
                    resource_ref,
                    f"tag {Tags.REQUIRE_SPOT}={truncate(raw, 60)!r} {flag}; spot is not required by it",
                )
            )
        else:
            spot = flag
    return PolicyTags(limit, spot, tuple(findings))


def project_policy(
    tagged: Iterable[PolicyTags],
    config: ProjectConfig | None,
    defaults: LaunchPolicy,
) -> ProjectPolicy:
    """The project's policy: its row of the central table first, then its resources' tags
    (the lowest limit, spot if any asks for it, as budgets are read), then the deployment's."""
    seen = list(tagged)
    limits = [t.max_usd_per_hour for t in seen if t.max_usd_per_hour is not None]
    spot = any(t.require_spot for t in seen)
    limit, source = None, ""
    if config is not None and config.max_usd_per_hour is not None:
        limit, source = config.max_usd_per_hour, "table"
    elif limits:
        limit, source = min(limits), "tag"
    elif defaults.max_usd_per_hour > 0:
        limit, source = defaults.max_usd_per_hour, "deployment"
    require_spot = bool(config is not None and config.require_spot) or spot
    return ProjectPolicy(limit, source, require_spot, defaults.regions)


def stricter(a: ProjectPolicy, b: ProjectPolicy) -> ProjectPolicy:
    """Both policies at once: a table's limit wins over tags; else the lower limit; spot if
    either requires it. (The launch's own tags, and the project's as the last scan read them.)"""
    if a.limit_source == "table" or b.limit_source == "table":
        chosen = a if a.limit_source == "table" else b
        limit, source = chosen.max_usd_per_hour, "table"
    else:
        options = [p for p in (a, b) if p.max_usd_per_hour is not None]
        best = min(options, key=lambda p: p.max_usd_per_hour or ZERO) if options else None
        limit, source = (best.max_usd_per_hour, best.limit_source) if best else (None, "")
        if source == "deployment" and any(p.limit_source == "tag" for p in options):
            tagged = [p for p in options if p.limit_source == "tag"]
            limit, source = min(p.max_usd_per_hour or ZERO for p in tagged), "tag"
    return ProjectPolicy(limit, source, a.require_spot or b.require_spot, a.regions or b.regions)


@dataclass(frozen=True, slots=True)
class Breach:
    cause: Cause
    message: str


def breaches(
    resource: Resource, usd_per_hour: Decimal | None, policy: ProjectPolicy
) -> list[Breach]:
    """Where one running resource is outside its project's policy (empty: inside)."""
    found: list[Breach] = []
    limit = policy.max_usd_per_hour
    if limit is not None and usd_per_hour is not None and usd_per_hour > limit:
        where = {
            "table": "the project's limit (projects table)",
            "tag": f"the project's limit ({Tags.MAX_USD_PER_HOUR})",
            "deployment": "the deployment's limit (maxUsdPerHour)",
        }
        found.append(
            Breach(
                Cause.USD_PER_HOUR,
                f"costs {per_hour(usd_per_hour)}, above {where.get(policy.limit_source, 'the limit')} "
                f"of {per_hour(limit)}",
            )
        )
    if (
        policy.require_spot
        and resource.kind in SPOT_KINDS
        and resource.lifecycle is not Lifecycle.SPOT
    ):
        found.append(
            Breach(
                Cause.SPOT,
                f"runs on on-demand capacity, and the project requires spot ({Tags.REQUIRE_SPOT})",
            )
        )
    if policy.regions and resource.region not in policy.regions:
        found.append(
            Breach(
                Cause.REGION,
                f"runs in {resource.region}, outside the allowed regions "
                f"({', '.join(sorted(policy.regions))})",
            )
        )
    return found


def policy_key(resource: AlertResource, cause: Cause) -> str:
    """The claim that reports one launch's breach of one rule once: an instance started
    again (a new launch, a new bill) is judged again; a launch time unknown is one launch."""
    started = resource.launched_at
    stamp = f"{started.astimezone(UTC):%Y%m%dT%H%M%SZ}" if started is not None else "unknown"
    return f"launch-policy/{resource.key}/{stamp}/{cause.value}"


def policy_alert(
    resource: AlertResource,
    project: str,
    found: Sequence[Breach],
    now: datetime,
    *,
    owners: Sequence[str] = (),
    launched_by: str | None = None,
) -> Alert | None:
    """One alert for one resource's breaches; each cause is claimed on its own."""
    if not found:
        return None
    now = require_utc(now)
    what = f"{resource.instance_type or resource.kind} {resource.key.rsplit('/', 1)[-1]}"
    monthly = (resource.usd_per_hour or ZERO) * 730
    facts = {"run_rate": rate_label(resource), "region": resource.region}
    if launched_by:
        facts["launched_by"] = launched_by
    return Alert(
        alert_id=f"{AlertKind.LAUNCH_POLICY}/{resource.key}/{'+'.join(b.cause.value for b in found)}",
        kind=AlertKind.LAUNCH_POLICY,
        project=project,
        severity=money_severity(monthly, AlertSeverity.WARNING),
        title=f"{project}: {what} is outside the project's policy",
        summary=f"{what} " + "; it ".join(b.message for b in found) + ".",
        at=now,
        why="; ".join(b.message for b in found),
        next_steps=(
            "Stop it, or relaunch it as the policy asks (a smaller type, spot capacity, an allowed region).",
            f"If the launch is intended, raise the project's limit ({Tags.MAX_USD_PER_HOUR}, or its "
            "row of the projects table) or tell its owner.",
        ),
        owners=tuple(dict.fromkeys([*owners, *([resource.owner] if resource.owner else [])])),
        resources=(resource,),
        facts=facts,
        dedupe=tuple(policy_key(resource, b.cause) for b in found),
    )


def rate_label(resource: AlertResource) -> str:
    """Its $/h, or "unpriced": a type the catalog does not know (a GPU newer than it) is not
    free, and a page that says $0.00/h would be read as harmless."""
    if resource.usd_per_hour is None:
        return "unpriced"
    return per_hour(resource.usd_per_hour)
