"""A launch, judged on its own within a minute: what the event says, the project's policy,
and the alerts a launch can raise. Pure: the on-launch service feeds it, and the scan's
alert rules judge every running resource by the same policy, under the same claims.

Three questions are asked of one accelerator that just started:

- **Whose is it?** No project: ``unattributed-spend``, the scan's own alert and claim
  (one per resource and UTC day), sent now rather than at the next scan.
- **Does it break the project's policy?** A $/h above the project's limit, on-demand
  capacity where the project requires spot, a region the deployment does not allow:
  ``launch-policy``, claimed once per resource and cause.
- **Does it take the project over budget?** The project's month-to-date and run-rate as
  the last scan left them (:class:`ProjectFigures`), plus this resource for the rest of
  the month: ``budget-forecast``, the scan's own alert and claim, naming the launch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from costguard.domain.alerts import (
    Alert,
    AlertKind,
    AlertResource,
    AlertSeverity,
    ProjectNumbers,
    budget_alerts,
    money_severity,
    unattributed_alert,
)
from costguard.domain.attribution import ProjectConfig
from costguard.domain.calendar import MAX_EVENT_AGE, MAX_EVENT_LEAD, month_key, require_utc
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.models import Lifecycle, Resource, ResourceKind
from costguard.domain.money import ZERO, cents, per_hour
from costguard.domain.spend import forecast_month_end
from costguard.domain.tags import Tags, parse_budget, parse_flag, parse_usd_per_hour
from costguard.domain.text import plural, truncate

#: The state document the scan's alert step leaves for the on-launch check.
FIGURES_STATE = "project-figures"
#: The figures document's JSON at most (a DynamoDB item holds 400 KB, keys included).
FIGURES_MAX_BYTES = 350_000
#: Past this, a project's figures are too old to forecast from (three missed daily scans).
FIGURES_MAX_AGE = timedelta(days=3)
#: At most this many instances of one ``RunInstances`` call are judged from its event.
MAX_INSTANCES_PER_CALL = 20

ACCOUNT = re.compile(r"[0-9]{12}")
REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}")
INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")
#: SageMaker's own rule for notebook, endpoint and training job names.
SAGEMAKER_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")

EC2_STATE_CHANGE = "EC2 Instance State-change Notification"
NOTEBOOK_STATE_CHANGE = "SageMaker Notebook Instance State Change"
ENDPOINT_STATE_CHANGE = "SageMaker Endpoint State Change"
TRAINING_STATE_CHANGE = "SageMaker Training Job State Change"
API_CALL = "AWS API Call via CloudTrail"

#: The states that start spending, per kind: the only ones judged.
LAUNCH_STATES: Mapping[ResourceKind, frozenset[str]] = {
    ResourceKind.EC2_INSTANCE: frozenset({"pending", "running"}),
    ResourceKind.SAGEMAKER_NOTEBOOK: frozenset({"InService"}),
    ResourceKind.SAGEMAKER_ENDPOINT: frozenset({"InService"}),
    ResourceKind.SAGEMAKER_TRAINING_JOB: frozenset({"InProgress"}),
}


def _canonical_state(kind: ResourceKind, state: str) -> str | None:
    """The describe call's spelling of a launch state, from the event's: SageMaker's endpoint
    events say ``IN_SERVICE`` where DescribeEndpoint says ``InService``."""
    wanted = state.replace("_", "").lower()
    return next((s for s in LAUNCH_STATES[kind] if s.lower() == wanted), None)


#: detail-type -> (kind, the detail field naming the resource, the field of its status).
_SAGEMAKER: Mapping[str, tuple[ResourceKind, str, str]] = {
    NOTEBOOK_STATE_CHANGE: (
        ResourceKind.SAGEMAKER_NOTEBOOK,
        "NotebookInstanceName",
        "NotebookInstanceStatus",
    ),
    ENDPOINT_STATE_CHANGE: (ResourceKind.SAGEMAKER_ENDPOINT, "EndpointName", "EndpointStatus"),
    TRAINING_STATE_CHANGE: (
        ResourceKind.SAGEMAKER_TRAINING_JOB,
        "TrainingJobName",
        "TrainingJobStatus",
    ),
}


@dataclass(frozen=True, slots=True)
class LaunchEvent:
    """One resource that an EventBridge event says started spending."""

    kind: ResourceKind
    account: str
    region: str
    #: The instance id, or the SageMaker notebook, endpoint or training job name.
    resource_id: str
    state: str
    at: datetime
    event_id: str
    #: Who made the call, when the event says (a CloudTrail API-call event does).
    launched_by: str | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    """An event that is not judged, and why. ``hostile``: malformed or out of bounds (logged
    as a warning); otherwise simply not a launch CostGuard checks (logged as info)."""

    reason: str
    hostile: bool = True


def _text(value: Any, limit: int = 256) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _event_time(value: Any, now: datetime) -> datetime | Refused:
    text = _text(value, 64)
    if text is None:
        return Refused("the event has no time")
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return Refused(f"the event's time {truncate(text, 40)!r} is not an ISO-8601 time")
    try:
        at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    except OverflowError:  # an offset that moves it past year 1 or 9999
        return Refused(f"the event's time {truncate(text, 40)!r} is outside the calendar in UTC")
    if at < now - MAX_EVENT_AGE:
        return Refused(
            f"the event is from {at:%Y-%m-%d %H:%M} UTC, more than "
            f"{int(MAX_EVENT_AGE.total_seconds() // 3600)} hours ago: the scan has judged it since",
            hostile=False,
        )
    if at > now + MAX_EVENT_LEAD:
        return Refused(f"the event's time {at:%Y-%m-%d %H:%M} UTC is ahead of the clock")
    return at


def identity_of(detail: Mapping[str, Any]) -> str | None:
    who = detail.get("userIdentity")
    if not isinstance(who, Mapping):
        return None
    arn = _text(who.get("arn"), 2048)
    if arn is None:
        return _text(who.get("principalId"), 256)
    # arn:aws:sts::123456789012:assumed-role/Admin/maria -> assumed-role/Admin/maria
    name = arn.split(":", 5)[-1]
    if len(name) > 200 and "/" in name:
        # An IAM path may be 512 characters: keep the type and the name, not the path
        # (a cut between whole tokens would leave only the ellipsis of an ARN).
        name = f"{name.split('/', 1)[0]}/…/{name.rsplit('/', 1)[-1]}"
    return truncate(name, 200)


def parse_launch_event(raw: Any, now: datetime) -> list[LaunchEvent] | Refused:
    """The launches an EventBridge event reports, or why it is refused. Total: any JSON value
    gives an answer, never an exception. A ``RunInstances`` API-call event reports each of
    its instances (at most :data:`MAX_INSTANCES_PER_CALL`)."""
    now = require_utc(now)
    if not isinstance(raw, Mapping):
        return Refused("the event is not a JSON object")
    detail_type, source = raw.get("detail-type"), raw.get("source")
    detail = raw.get("detail")
    if not isinstance(detail, Mapping):
        return Refused("the event has no detail object")
    account, region = _text(raw.get("account"), 12), _text(raw.get("region"), 32)
    if account is None or not ACCOUNT.fullmatch(account):
        return Refused("the event's account is not a 12-digit AWS account id")
    if region is None or not REGION.fullmatch(region):
        return Refused("the event's region is not an AWS region name")
    at = _event_time(raw.get("time"), now)
    if isinstance(at, Refused):
        return at
    event_id = _text(raw.get("id"), 128) or ""

    def one(
        kind: ResourceKind, rid: Any, state: Any, who: str | None = None
    ) -> LaunchEvent | Refused:
        pattern = INSTANCE_ID if kind is ResourceKind.EC2_INSTANCE else SAGEMAKER_NAME
        name = _text(rid, 63 if kind is not ResourceKind.EC2_INSTANCE else 19)
        if name is None or not pattern.fullmatch(name):
            return Refused(f"the event names no valid {kind.value} id")
        text = _text(state, 32)
        status = _canonical_state(kind, text) if text is not None else None
        if status is None:
            return Refused(
                f"{kind.value} state {truncate(str(state), 32)!r} is not a launch", hostile=False
            )
        assert isinstance(at, datetime)
        return LaunchEvent(kind, account, region, name, status, at, event_id, who)

    if source == "aws.ec2" and detail_type == EC2_STATE_CHANGE:
        found = one(ResourceKind.EC2_INSTANCE, detail.get("instance-id"), detail.get("state"))
        return found if isinstance(found, Refused) else [found]
    if source == "aws.sagemaker" and isinstance(detail_type, str) and detail_type in _SAGEMAKER:
        kind, name_field, status_field = _SAGEMAKER[str(detail_type)]
        found = one(kind, detail.get(name_field), detail.get(status_field))
        return found if isinstance(found, Refused) else [found]
    if (
        source == "aws.ec2"
        and detail_type == API_CALL
        and detail.get("eventName") == "RunInstances"
    ):
        if detail.get("errorCode"):
            return Refused("the RunInstances call failed: nothing was launched", hostile=False)
        response = detail.get("responseElements")
        instances = response.get("instancesSet") if isinstance(response, Mapping) else None
        items = instances.get("items") if isinstance(instances, Mapping) else None
        if not isinstance(items, list) or not items:
            return Refused("the RunInstances event lists no instances")
        who = identity_of(detail)
        events: list[LaunchEvent] = []
        for item in items[:MAX_INSTANCES_PER_CALL]:
            rid = item.get("instanceId") if isinstance(item, Mapping) else None
            found = one(ResourceKind.EC2_INSTANCE, rid, "pending", who)
            if isinstance(found, Refused):
                return found
            events.append(found)
        return events
    return Refused(
        f"not a launch event CostGuard checks (source {truncate(str(source), 40)!r}, "
        f"detail-type {truncate(str(detail_type), 60)!r})"
    )


# -- who launched it ----------------------------------------------------------------------

#: Tags AWS puts on what its automation launches, and how that launcher is named.
_AUTOMATION = (
    (Tags.EKS_NODEGROUP, "EKS node group"),
    ("karpenter.sh/nodepool", "Karpenter node pool"),
    ("aws:autoscaling:groupName", "Auto Scaling group"),
    ("aws:ec2spot:fleet-request-id", "Spot Fleet request"),
    ("aws:ec2:fleet-id", "EC2 Fleet"),
    ("aws:cloudformation:stack-name", "CloudFormation stack"),
)


def launcher_from_tags(tags: Mapping[str, str], *, aws_only: bool = False) -> str | None:
    """The automation that launched an instance, from the tags its automation puts on it.
    ``aws_only``: only AWS's reserved ``aws:`` tags, which no one launching can set (an
    ``eks:`` or ``karpenter.sh/`` tag is settable, so it is not proof of automation)."""
    for key, label in _AUTOMATION:
        if aws_only and not key.startswith("aws:"):
            continue
        value = tags.get(key)
        if value:
            return f"{label} {truncate(value, 120)}"
    return None


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
    facts = {"run_rate": _rate(resource), "region": resource.region}
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


# -- the project's figures, as the last scan left them ------------------------------------


@dataclass(frozen=True, slots=True)
class ProjectFigures:
    """One project at the last scan: what the launch check forecasts from."""

    at: datetime
    month_to_date: Decimal
    run_rate: Decimal
    budget: Decimal | None = None
    owners: tuple[str, ...] = ()
    policy: ProjectPolicy = ProjectPolicy()


def encode_figures(at: datetime, figures: Mapping[str, ProjectFigures]) -> dict[str, Any]:
    """The state document, within one ledger item (:data:`FIGURES_MAX_BYTES` of JSON). A row
    is about 100 bytes, but a project name may be 256 characters of escaped Unicode: when
    they do not all fit, the projects spending the most per hour are kept, and a launch of
    one left out is judged as its project's first resource."""
    rows = {name: _figures_row(f) for name, f in figures.items()}
    kept: dict[str, dict[str, Any]] = {}
    room = FIGURES_MAX_BYTES - 100  # the envelope: {"at": ..., "projects": {}}
    for name in sorted(rows, key=lambda n: (-figures[n].run_rate, -figures[n].month_to_date, n)):
        size = len(json.dumps({name: rows[name]}, sort_keys=True, default=str))
        if size > room:
            continue
        kept[name] = rows[name]
        room -= size
    return {"at": require_utc(at).isoformat(), "projects": dict(sorted(kept.items()))}


def _figures_row(f: ProjectFigures) -> dict[str, Any]:
    return {
        "mtd": str(f.month_to_date),
        "rate": str(f.run_rate),
        **({"budget": str(f.budget)} if f.budget is not None else {}),
        **({"owners": list(f.owners[:5])} if f.owners else {}),
        **(
            {"limit": str(f.policy.max_usd_per_hour), "limit_source": f.policy.limit_source}
            if f.policy.max_usd_per_hour is not None
            else {}
        ),
        **({"spot": True} if f.policy.require_spot else {}),
    }


def decode_figures(doc: Mapping[str, Any], defaults: LaunchPolicy) -> dict[str, ProjectFigures]:
    """The figures a state document holds; an unreadable row is skipped (no figure beats a
    wrong one: the launch is then judged as the project's first resource)."""
    try:
        at = require_utc(datetime.fromisoformat(str(doc["at"])))
        rows = doc.get("projects") or {}
    except (KeyError, TypeError, ValueError):
        return {}
    out: dict[str, ProjectFigures] = {}
    for name, row in rows.items() if isinstance(rows, Mapping) else ():
        try:
            if not isinstance(row, Mapping):
                continue
            budget = parse_budget(str(row["budget"])) if "budget" in row else None
            limit = _amount(row["limit"]) if "limit" in row else None
            owners, spot = row.get("owners", []), row.get("spot", False)
            if not isinstance(owners, list) or not isinstance(spot, bool):
                continue  # another shape than encode_figures writes: not guessed at
            out[str(name)] = ProjectFigures(
                at,
                _amount(row["mtd"]),
                _amount(row["rate"]),
                budget if isinstance(budget, Decimal) else None,
                tuple(str(o) for o in owners),
                ProjectPolicy(limit, str(row.get("limit_source", "")), spot, defaults.regions),
            )
        except (KeyError, TypeError, ValueError, ArithmeticError):
            continue
    return out


#: No figure of one project reaches this ($1 trillion): larger is garbage, and overflows
#: the cents arithmetic of an alert.
_MAX_AMOUNT = Decimal(10) ** 12


def _amount(value: Any) -> Decimal:
    """A finite amount from $0 to :data:`_MAX_AMOUNT` of a figures row; anything else is
    unreadable (NaN or Infinity would raise in every later comparison, 1e999 overflows the
    cents of an alert, a negative limit breach every launch)."""
    amount = Decimal(str(value))
    if not amount.is_finite() or not ZERO <= amount <= _MAX_AMOUNT:
        raise ValueError(f"not an amount: {truncate(str(value), 20)!r}")
    return amount


def figures_at(figures: ProjectFigures | None, now: datetime) -> tuple[Decimal, Decimal]:
    """(month-to-date now, run-rate) carried forward from the last scan at its run-rate; a
    month that has turned since starts again from zero. Unknown or stale figures: zero."""
    if figures is None or now - figures.at > FIGURES_MAX_AGE:
        return ZERO, ZERO
    since = max(figures.at, now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    hours = Decimal(max((now - since).total_seconds(), 0)) / 3600
    base = figures.month_to_date if month_key(figures.at) == month_key(now) else ZERO
    return base + figures.run_rate * hours, figures.run_rate


def counted_by_scan(resource: Resource, figures: ProjectFigures | None) -> bool:
    """True when the last scan ran after this resource started, and so counts its rate."""
    return (
        figures is not None
        and resource.launched_at is not None
        and resource.launched_at.astimezone(UTC) <= figures.at
    )


def launch_forecast_alert(
    project: str,
    figures: ProjectFigures | None,
    budget: Decimal | None,
    cause: AlertResource,
    counted: bool,
    now: datetime,
    thresholds: Sequence[int],
    *,
    owners: Sequence[str] | None = None,
    also: Sequence[AlertResource] = (),
) -> Alert | None:
    """``budget-forecast`` for the project with this launch running to the month's end, or
    None while the forecast stays under the budget. The scan's own alert and claim: the
    scan will not send it again this month, so it goes to the project's ``owners`` (by
    default those the last scan knew). ``also``: the launch's other resources of the
    project the last scan has not counted (an endpoint's other variants), added too."""
    if budget is None or budget <= 0:
        return None
    now = require_utc(now)
    mtd, rate = figures_at(figures, now)
    added = ZERO if counted else (cause.usd_per_hour or ZERO)
    added += sum((r.usd_per_hour or ZERO for r in also), ZERO)
    after = rate + added
    forecast = forecast_month_end(mtd, after, now)
    if forecast < budget:
        return None
    if owners is None:
        owners = figures.owners if figures else ()
    numbers = ProjectNumbers(project, budget, mtd, forecast, after, tuple(owners), (cause, *also))
    found = [
        a for a in budget_alerts(numbers, thresholds, now) if a.kind is AlertKind.BUDGET_FORECAST
    ]
    if not found:
        return None
    alert = found[0]
    what = f"{cause.instance_type or cause.kind} {cause.key.rsplit('/', 1)[-1]}"
    if also:
        what = f"{what} (+{plural(len(also), 'more resource')})"
    before = forecast_month_end(mtd, rate, now)
    if added and before < budget:
        lead = (
            f"The launch of {what} ({per_hour(added)}) takes {project}'s forecast to "
            f"${cents(forecast):,}, over its ${cents(budget):,} budget for {month_key(now)}."
        )
    else:
        lead = (
            f"{project}'s forecast is ${cents(forecast):,}, over its ${cents(budget):,} budget "
            f"for {month_key(now)}; {what} ({_rate(cause)}) just started."
        )
    return replace(
        alert,
        title=f"{project}: launch of {what} takes the forecast over budget"
        if added and before < budget
        else alert.title,
        summary=lead,
        why=f"launch of {what}: month-to-date plus the new run-rate for the rest of the month exceeds the budget",
        facts={**alert.facts, "cause": what},
    )


def launch_unattributed_alert(
    resource: AlertResource, now: datetime, launched_by: str | None
) -> Alert | None:
    """The scan's unattributed-spend alert for this one resource (its claim: once a day)."""
    alert = unattributed_alert([resource], now)
    if alert is None:
        return None
    who = launched_by or "not known yet (CloudTrail records the launch within about 5 minutes)"
    what = f"{resource.instance_type or resource.kind} {resource.key.rsplit('/', 1)[-1]}"
    return replace(
        alert,
        title=f"Just launched with no project: {what}, {_rate(resource)}",
        facts={**alert.facts, "run_rate": _rate(resource), "launched_by": who},
        details=(f"Launched by: {who}", *alert.details),
    )


def _rate(resource: AlertResource) -> str:
    """Its $/h, or "unpriced": a type the catalog does not know (a GPU newer than it) is not
    free, and a page that says $0.00/h would be read as harmless."""
    if resource.usd_per_hour is None:
        return "unpriced"
    return per_hour(resource.usd_per_hour)
