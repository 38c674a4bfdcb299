"""Every CostGuard setting, declared once: name, CDK context key, Lambda variable, type,
default, bounds and one line of documentation.

The declaration is three pydantic models, by the way a setting comes in:

- :class:`ContextAndEnv`: deployed from CDK context (``cdk.json``, ``-c key=value``) and read
  by the Lambdas from the variable the stack writes;
- :class:`ContextOnly`: read by the CDK app alone (schedules, sizes, subscriptions);
- :class:`EnvOnly`: no context key; the stack (or the CLI) sets the variable.

Each field is ``setting(default, context key, variable, bounds and checks)`` followed by its
one-line doc. Everything else is built from these fields:

- ``costguard_infra.config.CostGuardConfig`` (CDK context) is ``ContextOnly`` + ``ContextAndEnv``;
- :class:`costguard.settings.Settings` (``Settings.from_env``) is ``EnvOnly`` + ``ContextAndEnv``;
- the variables the stack writes (``CostGuardConfig.environment``, :meth:`SettingSpec.to_env`)
  and the Lambdas read back (:meth:`SettingSpec.read`);
- ``costguard.env.Env`` (the variables' names) and docs/configuration.md's table
  (``make docs``; tests/docs/test_configuration_page.py fails when they disagree).

Context given with ``-c`` and environment variables both arrive as strings, so every setting
reads its string form the same way in both places (:meth:`SettingSpec.read`).

Pure: no boto3, no CDK, no ``os.environ``.
"""

from __future__ import annotations

import ast
import copy
import functools
import itertools
import json
import re
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import to_jsonable_python

from costguard.domain.attribution import ProjectConfig
from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import (
    Tags,
    parse_budget,
    parse_owners,
    parse_project,
    parse_ttl,
    parse_usd_per_hour,
)
from costguard.domain.teams import TeamConfig

#: A whole ASCII string; ``\Z``, not ``$``, which would accept a trailing newline.
REGION = re.compile(r"\A[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}\Z")
RATE = re.compile(r"(?P<n>[0-9]+) (?P<unit>minute|minutes|hour|hours|day|days)")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
#: A Slack member id (users ``U…``, Enterprise Grid ``W…``).
SLACK_MEMBER = re.compile(r"[UW][A-Z0-9]{2,}")
#: Secrets Manager's own rule for a secret name.
SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
#: CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS: Final = (
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
    2922, 3288, 3653,
)  # fmt: skip
#: The scan runs at most this often (each scan costs API calls), and at least once a day:
#: alerts and the daily digest assume it, and the missed-scan alarm (two intervals) must
#: fit CloudWatch's 7-day evaluation limit (`4 days` synthesized, then failed to deploy).
MIN_RATE_MINUTES: Final = 5
MAX_RATE_MINUTES: Final = 24 * 60
#: An AWS account id; an AWS Organization id (``o-`` and 10 to 32 lower-case letters or digits).
ACCOUNT_ID = re.compile(r"[0-9]{12}")
ORG_ID = re.compile(r"o-[a-z0-9]{10,32}")
#: IAM's rule for a role name.
ROLE_NAME = re.compile(r"[A-Za-z0-9+=,.@_-]{1,64}")
#: ``orgAccounts=discover``: the accounts come from ``organizations:ListAccounts``.
ORG_DISCOVER: Final = "discover"
#: AWS Lambda refuses a function whose variables (names, values and their encoding) exceed 4 KB.
LAMBDA_ENVIRONMENT_BYTES: Final = 4096
#: Kept for what the stack adds to the variables from context (table name, topic ARN, account,
#: SageMaker and Powertools names): about 400 bytes as JSON with generated names; room to spare.
STACK_VARIABLES_BYTES: Final = 1024


class Kind(Enum):
    """How a setting's string form (``-c key=value``, an environment variable) is read."""

    #: Passed to pydantic as is: ``"80"`` is an int or a Decimal by the field's type.
    TEXT = "text"
    #: ``true``/``false``/``1``/``0``, any case: one vocabulary for context and variables.
    FLAG = "flag"
    #: Comma-separated (``us-east-1,us-west-2``) or a JSON array (``["a,b", "c"]``).
    LIST = "list"
    #: A JSON object.
    JSON = "json"


def _not_a_flag(value: object) -> object:
    """JSON true is not a budget of $1 (pydantic would read it as 1)."""
    if isinstance(value, bool):
        raise ValueError(f"must be an amount in USD, got {str(value).lower()}")
    return value


def _entry_budget(what: str, raw: str | float | int | None) -> Decimal | None:
    """A central table entry's budget, or a ValueError naming ``what`` and the value."""
    if raw is None:
        return None
    parsed = parse_budget(str(raw))
    if isinstance(parsed, str):
        raise ValueError(f"{what}: budget {raw!r} {parsed}")
    return parsed


def _entry_owners(what: str, raws: Sequence[str]) -> tuple[str, ...]:
    """A central table entry's owners, once each, or a ValueError naming the bad one."""
    owners: list[str] = []
    for raw in raws:
        parsed = parse_owners(raw)
        if parsed.problem is not None:
            raise ValueError(f"{what}: owner {raw!r}: {parsed.problem}")
        owners.extend(parsed.valid)
    return tuple(dict.fromkeys(owners))


class ProjectEntry(BaseModel):
    """A row of the central project table (``projects`` / ``COSTGUARD_PROJECTS_JSON``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: str | float | int | None = None
    owners: tuple[str, ...] = ()
    #: The project's limit on one resource's $/h (a launch above it is alerted).
    maxUsdPerHour: str | float | int | None = None
    #: The project's EC2 instances and training jobs must run on spot capacity.
    requireSpot: bool | None = None
    #: The team the project belongs to (wins over ``costguard:team`` tags).
    team: str | None = None

    @field_validator("budget", "maxUsdPerHour", mode="before")
    @classmethod
    def _not_a_flag(cls, value: object) -> object:
        return _not_a_flag(value)

    def to_domain(self, name: str) -> ProjectConfig:
        budget = _entry_budget(f"project {name!r}", self.budget)
        owners = _entry_owners(f"project {name!r}", self.owners)
        limit = None
        if self.maxUsdPerHour is not None:
            parsed_limit = parse_usd_per_hour(str(self.maxUsdPerHour))
            if isinstance(parsed_limit, str):
                raise ValueError(
                    f"project {name!r}: maxUsdPerHour {self.maxUsdPerHour!r} {parsed_limit}"
                )
            limit = parsed_limit
        team = None
        if self.team is not None:
            team, why = parse_project(self.team)
            if why is not None:
                raise ValueError(f"project {name!r}: team {self.team!r} {why}")
        return ProjectConfig(budget, owners, limit, bool(self.requireSpot), team)


class TeamEntry(BaseModel):
    """A row of the central team table (``teams`` / ``COSTGUARD_TEAMS_JSON``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: str | float | int | None = None
    owners: tuple[str, ...] = ()

    @field_validator("budget", mode="before")
    @classmethod
    def _not_a_flag(cls, value: object) -> object:
        return _not_a_flag(value)

    def to_domain(self, name: str) -> TeamConfig:
        return TeamConfig(
            _entry_budget(f"team {name!r}", self.budget),
            _entry_owners(f"team {name!r}", self.owners),
        )


# -- validation: each check raises ValueError("must be ..., got ...") or returns the value ----


def _shown(values: Any) -> str:
    return ", ".join(map(repr, values))


def valid_regions(value: tuple[str, ...]) -> tuple[str, ...]:
    """AWS region names, in order, without repeats."""
    bad = [r for r in value if not REGION.match(r)]
    if bad:
        raise ValueError(f"must be AWS region names like us-east-1, got {_shown(bad)}")
    return tuple(dict.fromkeys(value))


def valid_thresholds(value: tuple[int, ...]) -> tuple[int, ...]:
    """Budget alert thresholds: percentages of the budget, sorted, without repeats."""
    if not value or any(not 0 < t <= 1000 for t in value):
        raise ValueError(f"must be percentages between 1 and 1000, got {list(value)}")
    return tuple(sorted(set(value)))


def rate_minutes(rate: str) -> int:
    """Minutes in a rate such as ``15 minutes``, ``1 hour`` or ``1 day``."""
    match = RATE.fullmatch(rate.strip())
    if not match:
        raise ValueError(f"must be a rate like `15 minutes`, got `{rate}`")
    n, unit = int(match["n"]), match["unit"]
    if n == 0 or (n == 1) != (not unit.endswith("s")):
        raise ValueError(f"must be a rate like `15 minutes` or `1 hour`, got `{rate}`")
    return n * (1 if unit.startswith("minute") else 60 if unit.startswith("hour") else 1440)


def valid_rate(value: str) -> str:
    minutes = rate_minutes(value)
    if minutes < MIN_RATE_MINUTES:
        raise ValueError(f"must be at least `5 minutes` (each scan costs API calls), got `{value}`")
    if minutes > MAX_RATE_MINUTES:
        raise ValueError(
            f"must be at most `1 day` (alerts and the daily digest need a scan a day), got `{value}`"
        )
    return value.strip()


#: The price refresh runs at least daily (the API's prices change at most a few times a
#: month) and at most monthly (the default staleness finding fires after 30 days).
MIN_REFRESH_MINUTES: Final = 24 * 60
MAX_REFRESH_MINUTES: Final = 30 * 24 * 60


def valid_refresh_rate(value: str) -> str:
    minutes = rate_minutes(value)
    if not MIN_REFRESH_MINUTES <= minutes <= MAX_REFRESH_MINUTES:
        raise ValueError(f"must be a rate from `1 day` to `30 days`, got `{value}`")
    return value


def valid_ttl(value: str) -> str:
    parsed = parse_ttl(value)
    if isinstance(parsed, str):
        raise ValueError(f"must be a time to live such as 30d or 48h, got {value!r}: {parsed}")
    return value.strip()


def valid_emails(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [e for e in value if not EMAIL.fullmatch(e)]
    if bad:
        raise ValueError(f"must be e-mail addresses, got {_shown(bad)}")
    return value


def valid_secret_name(value: str) -> str:
    if not SECRET_NAME.fullmatch(value):
        raise ValueError(
            "must be a Secrets Manager secret name (1 to 512 of A-Z a-z 0-9 / _ + = . @ -), "
            f"got {value!r}"
        )
    return value


def valid_tag_keys(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [k for k in value if not 0 < len(k) <= 128]
    if bad:
        raise ValueError(f"must be tag keys of 1 to 128 characters, got {_shown(bad)}")
    return value


def project_table(value: Mapping[str, ProjectEntry]) -> dict[str, ProjectConfig]:
    """The central table, its names normalised exactly as project tags are.

    A name pasted with a no-break space, or typed full-width, is the same project as the
    tag typed plainly; a name the tag contract refuses, or two names that normalise to
    one, are errors. The synth and the Lambdas both check through here, so a table the
    synth accepts is one every Lambda can start with.
    """
    table: dict[str, ProjectConfig] = {}
    for raw, entry in value.items():
        name, why = parse_project(raw)
        if name is None:
            raise ValueError(f"project {raw!r} {why}")
        if name in table:
            raise ValueError(f"projects {raw!r} and another entry are both {name!r}")
        table[name] = entry.to_domain(name)
    return table


def valid_projects(value: dict[str, ProjectEntry]) -> dict[str, ProjectEntry]:
    project_table(value)
    return value


def team_table(value: Mapping[str, TeamEntry]) -> dict[str, TeamConfig]:
    """The central team table, its names normalised exactly as ``costguard:team`` tags are."""
    table: dict[str, TeamConfig] = {}
    for raw, entry in value.items():
        name, why = parse_project(raw)
        if name is None:
            raise ValueError(f"team {raw!r} {why}")
        if name in table:
            raise ValueError(f"teams {raw!r} and another entry are both {name!r}")
        table[name] = entry.to_domain(name)
    return table


def valid_teams(value: dict[str, TeamEntry]) -> dict[str, TeamEntry]:
    team_table(value)
    return value


def valid_key_prefixes(value: tuple[str, ...]) -> tuple[str, ...]:
    for prefix in value:
        if not prefix or len(prefix.encode("utf-8", "surrogatepass")) > 1024:
            raise ValueError(f"each prefix must be 1-1024 bytes, got {prefix!r}")
    return value


def valid_retention(value: int) -> int:
    if value not in LOG_RETENTION_DAYS:
        raise ValueError(
            f"must be one of CloudWatch's retention periods {LOG_RETENTION_DAYS}, got {value}"
        )
    return value


def valid_org_accounts(value: tuple[str, ...]) -> tuple[str, ...]:
    """Nothing (one account), ``discover``, or 12-digit account ids, in order without repeats."""
    if len(value) == 1 and value[0].strip().lower() == ORG_DISCOVER:
        return (ORG_DISCOVER,)
    ids = tuple(v.strip() for v in value)
    bad = [v for v in ids if not ACCOUNT_ID.fullmatch(v)]
    if bad:
        raise ValueError(
            f"must be `{ORG_DISCOVER}` alone or 12-digit AWS account ids (comma-separated), "
            f"got {_shown(bad)}"
        )
    return tuple(dict.fromkeys(ids))


def valid_org_id(value: str) -> str:
    text = value.strip()
    if text and not ORG_ID.fullmatch(text):
        raise ValueError(
            f"must be an AWS Organization id like o-abc1234567 (o- and 10 to 32 lower-case "
            f"letters or digits), got {value!r}"
        )
    return text


def valid_role_name(value: str) -> str:
    if not ROLE_NAME.fullmatch(value):
        raise ValueError(
            f"must be an IAM role name (1 to 64 of A-Z a-z 0-9 + = , . @ _ -), got {value!r}"
        )
    return value


def valid_time_zone(value: str) -> str:
    """An IANA time zone name that this Python knows (``Europe/Paris``, ``UTC``)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # noqa: PLC0415 - the synth's only

    text = value.strip()
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"must be an IANA time zone such as Europe/Paris, got {value!r}") from None
    return text


def valid_admins(value: tuple[str, ...]) -> tuple[str, ...]:
    """Slack member IDs (``U…``/``W…``) or e-mail addresses, without repeats; no commas (the
    variable the Lambdas read is comma-separated)."""
    bad = [a for a in value if "," in a or not (SLACK_MEMBER.fullmatch(a) or EMAIL.fullmatch(a))]
    if bad:
        raise ValueError(f"must be Slack member IDs or e-mail addresses, got {_shown(bad)}")
    return tuple(dict.fromkeys(value))


def valid_tag_key(value: str) -> str:
    if not 0 < len(value) <= 128:
        raise ValueError(f"must be a tag key of 1 to 128 characters, got {value!r}")
    return value


def org_problem(accounts: tuple[str, ...], org_id: str, *, accounts_name: str) -> str | None:
    """Why the Organization id is missing, if it is: the hub may assume member roles only
    inside its Organization (``aws:ResourceOrgID``), so it must know which."""
    if accounts and not org_id:
        return (
            f"is required when {accounts_name} is set (the hub assumes member roles only "
            "inside the Organization)"
        )
    return None


# -- how a setting is declared -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SettingSpec:
    """One setting, as :func:`setting` declares it and :data:`BY_NAME` holds it.

    ``context_key`` None: the stack provides it; ``env_var`` None: deploy-only.
    """

    context_key: str | None
    env_var: str | None
    #: Runs after pydantic's type check; returns the (normalised) value or raises ValueError.
    check: Callable[[Any], Any] | None = None
    #: Variables read, in order, when ``env_var`` is unset (e.g. the Lambda's own region).
    env_fallbacks: tuple[str, ...] = ()
    #: No default in the Lambdas: the variable (or a fallback) must be set.
    env_required: bool = False
    #: Accepted and validated but read by nothing yet: why it exists.
    reserved: str | None = None
    #: Only the Organization hub's Lambdas get its variable (a single-account stack sets none).
    org: bool = False
    #: The empty string is a value of its own, not "unset": ``-c sweepKeepPrefix=`` (no keep
    #: prefix) reaches the Lambda as an empty variable, which must read back as empty, not
    #: as the default. Set exactly where "" is valid and differs from the default
    #: (tests/unit/test_settings_spec.py checks every setting).
    empty_is_value: bool = False
    # Filled in from the field (:func:`_specs`): its name, type and default.
    name: str = ""
    type: Any = None
    default: Any = None
    kind: Kind = Kind.TEXT

    @property
    def doc(self) -> str:
        """The docstring under the field, on one line."""
        return _docstrings().get(self.name, "")

    def read(self, value: Any) -> Any:
        """A string form (context, variable) as the structure pydantic validates."""
        if self.kind is Kind.FLAG and not isinstance(value, bool):
            flag = str(value).strip().lower()
            if flag in {"true", "1"}:
                return True
            if flag in {"false", "0"}:
                return False
            raise ValueError(f"must be true or false, got {value!r}")
        if not isinstance(value, str):
            return value
        if self.kind is Kind.LIST:
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"must be a JSON array or comma-separated: {exc}") from None
            return [p.strip() for p in text.split(",") if p.strip()]
        if self.kind is Kind.JSON:
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be JSON: {exc}") from None
        return value

    def to_env(self, value: Any) -> str:
        """The variable's text; :meth:`read` gives ``value`` back."""
        if self.kind is Kind.FLAG:
            return "true" if value else "false"
        if self.kind is Kind.LIST:
            items = [str(v) for v in value]
            # Comma-separated reads best; JSON keeps an item with a comma or spaces intact.
            plain = all(i and i == i.strip() and "," not in i for i in items)
            if items and plain and not items[0].startswith("["):
                return ",".join(items)
            return json.dumps(items)
        if self.kind is Kind.JSON:
            return json.dumps(to_jsonable_python(value, exclude_none=True), separators=(",", ":"))
        return str(value)

    def shown_default(self) -> str:
        """The default as one would write it with ``-c``, for the docs."""
        if self.kind is Kind.FLAG:
            return f"`{'true' if self.default else 'false'}`"
        if self.kind is Kind.LIST:
            return f"`{self.to_env(self.default)}`" if self.default else "none"
        if self.kind is Kind.JSON:
            return f"`{json.dumps(self.default)}`"
        return f"`{self.default}`" if self.default != "" else "none"


def setting(
    default: Any,
    context_key: str | None,
    env_var: str | None,
    *,
    check: Callable[[Any], Any] | None = None,
    fallbacks: tuple[str, ...] = (),
    env_required: bool = False,
    reserved: str | None = None,
    org: bool = False,
    empty_is_value: bool = False,
    **bounds: Any,
) -> Any:
    """A field of the declaration: its default, its ways in, and pydantic ``bounds``
    (``ge``, ``le``, ``min_length``...); the docstring under the field is its doc."""
    spec = SettingSpec(
        context_key, env_var, check, fallbacks, env_required, reserved, org, empty_is_value
    )
    if isinstance(default, dict):
        info = Field(default_factory=lambda: copy.deepcopy(default), **bounds)
    else:
        info = Field(default, **bounds)
    info.metadata.append(spec)
    return info


def _kind(annotation: Any) -> Kind:
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return Kind.FLAG
    return Kind.LIST if origin is tuple else Kind.JSON if origin is dict else Kind.TEXT


def _specs(model: type[BaseModel]) -> tuple[SettingSpec, ...]:
    """The settings a declaration model holds, completed from their fields."""
    return tuple(
        replace(
            meta,
            name=name,
            type=info.annotation,
            default=info.get_default(call_default_factory=True),
            kind=_kind(info.annotation),
        )
        for name, info in model.model_fields.items()
        for meta in info.metadata
        if isinstance(meta, SettingSpec)
    )


class SpecModel(BaseModel):
    """A model whose fields are settings: each reads its string form and runs its check."""

    # Built when first used: a Lambda builds only its Settings, not the declaration's parts.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _read(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        return BY_NAME[info.field_name].read(value)

    @field_validator("*", mode="after")
    @classmethod
    def _check(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        check = BY_NAME[info.field_name].check
        return check(value) if check is not None else value


# -- the declaration -----------------------------------------------------------------------------


class ContextAndEnv(SpecModel):
    """Deployed from CDK context, and read by the Lambdas from their environment."""

    regions: tuple[str, ...] = setting(
        ("us-east-1", "us-west-2"),
        "regions",
        "COSTGUARD_REGIONS",
        min_length=1,
        check=valid_regions,
        fallbacks=("AWS_REGION", "AWS_DEFAULT_REGION"),
        env_required=True,
    )
    """Regions to scan."""

    scan_rate: str = setting("15 minutes", "scanRate", "COSTGUARD_SCAN_RATE", check=valid_rate)
    """How often the scan runs, from `5 minutes` to `1 day`."""

    dry_run: bool = setting(True, "dryRun", "COSTGUARD_DRY_RUN")
    """Actions only report what they would do."""

    warning_pct: Decimal = setting(Decimal(80), "warningPct", "COSTGUARD_WARNING_PCT", gt=0, le=100)
    """Forecast percentage of the budget that makes a project `warning` (above 0, at most 100)."""

    budget_thresholds: tuple[int, ...] = setting(
        (50, 80, 100), "budgetThresholds", "COSTGUARD_BUDGET_THRESHOLDS", check=valid_thresholds
    )
    """Month-to-date percentages of the budget that alert (1–1000)."""

    ttl_hours: int = setting(48, "ttlHours", "COSTGUARD_TTL_HOURS", ge=1, le=24 * 365)
    """Default time to live (hours) of stale data: an unattached EBS volume is deleted once
    unattached this long, unless its `costguard:ttl` tag says otherwise."""

    ebs_snapshot_before_delete: bool = setting(
        True, "ebsSnapshotBeforeDelete", "COSTGUARD_EBS_SNAPSHOT_BEFORE_DELETE"
    )
    """Snapshot a stale EBS volume, and wait for the snapshot to complete, before deleting it."""

    ebs_snapshot_ttl: str = setting(
        "30d", "ebsSnapshotTtl", "COSTGUARD_EBS_SNAPSHOT_TTL", check=valid_ttl
    )
    """The `costguard:ttl` written on that snapshot (e.g. `30d`): it is deleted after it."""

    s3_sweep_prefixes: tuple[str, ...] = setting(
        (), "sweepPrefixes", "COSTGUARD_S3_SWEEP_PREFIXES", check=valid_key_prefixes
    )
    """Key prefixes the stale-object sweep is limited to in every `costguard:ttl` bucket (none:
    the whole bucket)."""

    s3_keep_prefix: str = setting(
        "keep/", "sweepKeepPrefix", "COSTGUARD_S3_KEEP_PREFIX", max_length=1024, empty_is_value=True
    )
    """Objects under this key prefix are never deleted (empty: no keep prefix)."""

    s3_purge_noncurrent: bool = setting(
        False, "sweepPurgeNoncurrent", "COSTGUARD_S3_PURGE_NONCURRENT"
    )
    """Versioned buckets: the lifecycle backstop also expires noncurrent versions after the time
    to live (otherwise deleted objects stay recoverable behind delete markers)."""

    s3_breaker_pct: int = setting(50, "sweepBreakerPct", "COSTGUARD_S3_BREAKER_PCT", ge=1, le=100)
    """The sweep stops and asks for `costguard:confirm-delete` before a pass that would delete
    more than this percentage of the objects in scope, as that pass counted them before its
    first delete (1–100)."""

    s3_breaker_max_gib: int = setting(
        1024, "sweepBreakerMaxGib", "COSTGUARD_S3_BREAKER_MAX_GIB", ge=1, le=1024 * 1024
    )
    """…or more than this many GiB in one pass (1–1048576)."""

    s3_backstop: bool = setting(True, "sweepBackstop", "COSTGUARD_S3_BACKSTOP")
    """Merge a lifecycle rule (expire a day after the TTL in whole days, abort uploads after a
    day) into each swept bucket while the breaker allows its sweep, where it cannot reach the
    keep prefix."""

    anomaly_min_ratio: Decimal = setting(
        Decimal(2), "anomalyMinRatio", "COSTGUARD_ANOMALY_MIN_RATIO", ge=1, le=1000
    )
    """A burn-rate spike must be at least this many times the baseline (1–1000)."""

    anomaly_min_usd_per_hour: Decimal = setting(
        Decimal(10),
        "anomalyMinUsdPerHour",
        "COSTGUARD_ANOMALY_MIN_USD_PER_HOUR",
        ge=0,
        le=1_000_000,
    )
    """A burn-rate spike must also be at least this many $/h above the baseline (0–1,000,000)."""

    anomaly_cooldown_minutes: int = setting(
        60, "anomalyCooldownMinutes", "COSTGUARD_ANOMALY_COOLDOWN_MINUTES", ge=0, le=365 * 24 * 60
    )
    """The minimum time between two spike alerts for one project (0 to 525600, a year)."""

    digest_hour_utc: int = setting(8, "digestHourUtc", "COSTGUARD_DIGEST_HOUR_UTC", ge=0, le=23)
    """The hour (UTC, 0–23) from which the daily findings digest is sent."""

    scan_failed_alert_after: int = setting(
        3, "scanFailedAlertAfter", "COSTGUARD_SCAN_FAILED_ALERT_AFTER", ge=1, le=1000
    )
    """Consecutive failed scans of a region or service before a `scan-failed` alert (1–1000)."""

    advice_alerts: bool = setting(True, "adviceAlerts", "COSTGUARD_ADVICE_ALERTS")
    """Send the scan's advice (spot with checkpointing, oversized endpoints, pending capacity)
    as one `info` `advice-digest` alert per project per UTC day, from `digestHourUtc`."""

    advice_min_monthly_usd: Decimal = setting(
        Decimal(50), "adviceMinMonthlyUsd", "COSTGUARD_ADVICE_MIN_MONTHLY_USD", ge=0, le=1_000_000
    )
    """Advice that saves less than this many USD a month is left out of the advice digest, not
    of the scan report (0–1,000,000)."""

    cost_explorer: bool = setting(False, "costExplorer", "COSTGUARD_COST_EXPLORER")
    """Reconcile month-to-date with Cost Explorer and forward AWS Cost Anomaly Detection
    anomalies (below)."""

    price_change_hold_pct: Decimal = setting(
        Decimal(50), "priceChangeHoldPct", "COSTGUARD_PRICE_CHANGE_HOLD_PCT", ge=1, le=1000
    )
    """A refreshed rate that moved more than this percentage either way is held for review (a
    `price-catalog` finding), not applied (1–1000)."""

    price_catalog_max_age_days: int = setting(
        30, "priceCatalogMaxAgeDays", "COSTGUARD_PRICE_CATALOG_MAX_AGE_DAYS", ge=1, le=365
    )
    """A price catalog whose rates for a scanned region are older than this many days is a
    `price-catalog` finding and a dashboard warning (1–365)."""

    idle_minutes: int = setting(60, "idleMinutes", "COSTGUARD_IDLE_MINUTES", ge=15, le=10_080)
    """Idle-notebook window: idle only if every datapoint in it is under the thresholds
    (15–10080 minutes; the tag `costguard:idle-minutes` overrides it per resource)."""

    idle_gpu_pct: Decimal = setting(
        Decimal(5), "idleGpuPct", "COSTGUARD_IDLE_GPU_PCT", gt=0, le=100
    )
    """A notebook is idle only while every GPU's utilization stays under this percentage (above
    0, at most 100)."""

    idle_cpu_pct: Decimal = setting(
        Decimal(5), "idleCpuPct", "COSTGUARD_IDLE_CPU_PCT", gt=0, le=100
    )
    """An EC2 notebook is idle only while its CPU utilization stays under this percentage (above
    0, at most 100)."""

    idle_network_mb: Decimal = setting(
        Decimal(5), "idleNetworkMb", "COSTGUARD_IDLE_NETWORK_MB", ge=0, le=100_000
    )
    """An EC2 notebook is idle only while NetworkIn + NetworkOut stay under this many MB per 5
    minutes (0–100000): above background agent traffic, below any real transfer."""

    idle_max_runtime_hours: int = setting(
        12, "idleMaxRuntimeHours", "COSTGUARD_IDLE_MAX_RUNTIME_HOURS", ge=1, le=720
    )
    """A SageMaker notebook instance without CostGuard's heartbeat is stopped after this many
    hours InService (1–720)."""

    idle_grace_minutes: int = setting(
        60, "idleGraceMinutes", "COSTGUARD_IDLE_GRACE_MINUTES", ge=15, le=10_080
    )
    """How long an idle notebook's owner is warned before it is stopped (15–10080 minutes)."""

    idle_all_accelerators: bool = setting(
        False, "idleAllAccelerators", "COSTGUARD_IDLE_ALL_ACCELERATORS"
    )
    """Judge every running accelerator EC2 instance in scope as a notebook, not only those
    tagged `costguard:role=notebook`."""

    max_gpu_hours: int = setting(0, "maxGpuHours", "COSTGUARD_MAX_GPU_HOURS", ge=0, le=8760)
    """The maximum lifetime, in hours from launch, of every accelerator instance, notebook
    instance and training job in scope that carries neither `costguard:max-hours` nor
    `costguard:expires` (0–8760; 0, the default, is off): its owner is warned, then it is
    stopped (see docs/max-lifetime.md)."""

    max_usd_per_hour: Decimal = setting(
        Decimal(0), "maxUsdPerHour", "COSTGUARD_MAX_USD_PER_HOUR", ge=0, le=100_000
    )
    """The most one accelerator instance, notebook, endpoint variant or training job may cost an
    hour, for every project without its own limit (`costguard:max-usd-per-hour`, or
    `maxUsdPerHour` in its row of `projects`); 0, the default, is no limit. A launch above it
    is alerted within a minute (see docs/launch-alerts.md)."""

    launch_regions: tuple[str, ...] = setting(
        (), "launchRegions", "COSTGUARD_LAUNCH_REGIONS", check=valid_regions
    )
    """Regions where accelerators may be launched; a launch anywhere else is alerted. Empty, the
    default: every region."""

    lifetime_grace_minutes: int = setting(
        60, "lifetimeGraceMinutes", "COSTGUARD_LIFETIME_GRACE_MINUTES", ge=15, le=10_080
    )
    """How long before a maximum lifetime ends its owner is warned (15–10080 minutes); the
    stop comes at the end, and never sooner than this after the warning."""

    idle_gpu_discovery: Literal["search", "list"] = setting(
        "search", "idleGpuDiscovery", "COSTGUARD_IDLE_GPU_DISCOVERY"
    )
    """How the idle guard finds the CloudWatch agent's GPU series: `search` (a `SEARCH`
    expression per instance, in the metric reads themselves) or `list` (`ListMetrics` first:
    for CloudWatch emulators that do not evaluate `SEARCH`, such as moto)."""

    project_tag_keys: tuple[str, ...] = setting(
        (Tags.PROJECT, *Tags.PROJECT_FALLBACKS),
        "projectTagKeys",
        "COSTGUARD_PROJECT_TAG_KEYS",
        min_length=1,
        check=valid_tag_keys,
    )
    """Tag keys for the project, in order of precedence."""

    projects: dict[str, ProjectEntry] = setting(
        {}, "projects", "COSTGUARD_PROJECTS_JSON", check=valid_projects
    )
    """The central project table (JSON), which overrides tags: per project its `budget`,
    `owners`, `maxUsdPerHour`, `requireSpot` and `team`."""

    teams: dict[str, TeamEntry] = setting({}, "teams", "COSTGUARD_TEAMS_JSON", check=valid_teams)
    """The central team table (JSON), which overrides `costguard:team-budget` tags: per team
    its monthly `budget` and `owners` (see docs/tagging.md, Teams)."""

    # -- Organization mode: the hub (none of it is deployed while `orgAccounts` is empty) --
    org_accounts: tuple[str, ...] = setting(
        (), "orgAccounts", "COSTGUARD_ORG_ACCOUNTS", check=valid_org_accounts, org=True
    )
    """Organization mode: `discover` (the Organization's ACTIVE accounts, from
    `organizations:ListAccounts`) or comma-separated 12-digit account ids; none: one account,
    no hub resources."""

    org_id: str = setting("", "orgId", "COSTGUARD_ORG_ID", check=valid_org_id, org=True)
    """The Organization's id (`o-…`), required with `orgAccounts`: the hub may assume member
    roles only in its accounts (`aws:ResourceOrgID`)."""

    org_member_role: str = setting(
        OrgRoles.MEMBER_READ,
        "orgMemberRole",
        "COSTGUARD_MEMBER_ROLE",
        check=valid_role_name,
        org=True,
    )
    """The role the hub's consumers assume in each member account (the member stack's)."""

    org_per_account_concurrency: int = setting(
        2, "orgPerAccountConcurrency", "COSTGUARD_PER_ACCOUNT_CONCURRENCY", ge=1, le=10, org=True
    )
    """At most this many of one account's regions are scanned at once (FIFO message groups per
    account, 1–10): each account's API rate limits are its own."""

    org_probe_hours: int = setting(
        6, "orgProbeHours", "COSTGUARD_PROBE_HOURS", ge=1, le=168, org=True
    )
    """Account-regions with nothing to scan are skipped and re-probed this often (1–168 hours):
    the longest a GPU in a new region can go unseen."""

    org_slice_deadline_minutes: int = setting(
        10, "orgSliceDeadlineMinutes", "COSTGUARD_SLICE_DEADLINE_MINUTES", ge=1, le=120, org=True
    )
    """Each scheduled time is rolled up across accounts when every account-region is in or this
    many minutes after it (1–120); a later one counts the next time."""

    org_opt_out_tag: str = setting(
        Tags.ORG_OPT_OUT, "orgOptOutTag", "COSTGUARD_ORG_OPT_OUT_TAG", check=valid_tag_key, org=True
    )
    """An account tagged with this key and the value `true` is left out (discovered accounts
    only)."""

    org_regions: Literal["listed", "enabled"] = setting(
        "listed", "orgRegions", "COSTGUARD_ORG_REGIONS", org=True
    )
    """Which regions of each account are guarded: `listed` (those each account enabled, within
    `regions`) or `enabled` (every region each account enabled, whatever `regions` says: a
    GPU in a region nobody listed is still found)."""


class ContextOnly(SpecModel):
    """Read by the CDK app alone: no Lambda has a variable for them."""

    price_refresh_rate: str = setting("7 days", "priceRefreshRate", None, check=valid_refresh_rate)
    """How often the price-refresh Lambda reads the AWS Price List API into the stored catalog,
    from `1 day` to `30 days`."""

    idle_rate: str = setting("60 minutes", "idleRate", None, check=valid_rate)
    """How often the idle-notebook guard runs (`5 minutes` to `1 day`; the window by default,
    which keeps its CloudWatch bill under $10/month for 1,000 notebooks when enforcing; in
    dry-run, which reads idle notebooks in full every run, up to $29.20)."""

    alert_emails: tuple[str, ...] = setting((), "alertEmails", None, check=valid_emails)
    """E-mail addresses subscribed to the alert topic."""

    slack_webhook_secret_name: str = setting(
        "costguard/slack-webhook", "slackWebhookSecretName", None, check=valid_secret_name
    )
    """The Secrets Manager secret that holds the Slack webhook."""

    launch_alerts: bool = setting(True, "launchAlerts", None)
    """Alert within a minute of an accelerator launch: EventBridge rules send each launch to the
    on-launch Lambda, which checks that one resource (see docs/launch-alerts.md)."""

    answers: bool = setting(False, "answers", None)
    """Let owners answer action warnings from Slack (buttons) and e-mail (signed links): deploys
    the answer endpoint (a Lambda Function URL), its two secrets, and the guards' right to
    write `costguard:exempt` (see docs/deploy.md). Off: none of it is deployed."""

    answer_admins: tuple[str, ...] = setting((), "answerAdmins", None, check=valid_admins)
    """Slack member IDs or e-mail addresses who may answer any action warning, besides its
    owners (`costguard:owner`); written (`COSTGUARD_ANSWER_ADMINS`) only to the Lambdas that
    take answers, with `answers` on."""

    time_zone: str = setting("UTC", "timeZone", None, check=valid_time_zone)
    """The IANA time zone of "keep until tomorrow 09:00" (e.g. `Europe/Paris`); the answer
    endpoint's only."""

    slack_signing_secret_name: str = setting(
        "costguard/slack-signing-secret",
        "slackSigningSecretName",
        None,
        check=valid_secret_name,
    )
    """The Secrets Manager secret that holds the Slack app's signing secret (with `answers`)."""

    slack_bot_token_secret_name: str = setting(
        "costguard/slack-bot-token",
        "slackBotTokenSecretName",
        None,
        check=valid_secret_name,
    )
    """The Secrets Manager secret that holds the Slack app's bot token (`xoxb-…`), with which
    the answer endpoint opens the Exempt… dialog (with `answers`; only its Lambda reads it)."""

    answer_concurrency: int = setting(5, "answerConcurrency", None, ge=1, le=100)
    """The answer endpoint's reserved concurrency (1–100): a flood of requests queues, and never
    starves the scan and the guards."""

    on_launch_concurrency: int = setting(5, "onLaunchConcurrency", None, ge=1, le=100)
    """The on-launch Lambda's reserved concurrency (1–100): a burst of launches queues, and
    never starves the scan and the guards."""

    log_retention_days: int = setting(90, "logRetentionDays", None, check=valid_retention)
    """Lambda log retention (one of CloudWatch's periods: 1, 3, 5, 7, 14, 30, 60, 90, …)."""

    scan_memory_mb: int = setting(1024, "scanMemoryMb", None, ge=128, le=10240)
    """Scan Lambda memory (128–10240 MB)."""

    scan_timeout_seconds: int = setting(600, "scanTimeoutSeconds", None, ge=30, le=900)
    """Scan Lambda timeout (30–900 s); in Organization mode the queue consumer's, and the work
    queue's visibility timeout is six times it."""

    org_max_concurrency: int = setting(20, "orgMaxConcurrency", None, ge=2, le=1000, org=True)
    """At most this many queue consumers run at once, all accounts together (the event source's
    maximum concurrency, 2–1000)."""

    org_max_receives: int = setting(3, "orgMaxReceives", None, ge=1, le=100, org=True)
    """A work item that failed this many times moves to the dead-letter queue, which alarms
    (1–100)."""


class EnvOnly(SpecModel):
    """Set by the stack (or the CLI): no context key."""

    table_name: str | None = setting(None, None, "COSTGUARD_TABLE_NAME")
    """The ledger table (none: in memory)."""

    scope: str = setting("default", None, "COSTGUARD_SCOPE")
    """Whose spend: the account id when deployed."""

    topic_arn: str | None = setting(None, None, "COSTGUARD_TOPIC_ARN")
    """The alert topic (none: no alerts)."""

    guard: str | None = setting(None, None, "COSTGUARD_GUARD")
    """The one guard an actuator Lambda runs (its role holds only that guard's permissions)."""

    sagemaker_tags: Literal["tagging-api", "per-resource"] = setting(
        "tagging-api", None, "COSTGUARD_SAGEMAKER_TAGS"
    )
    """How SageMaker tags are read: one tagging-API call, or ListTags per resource."""

    sagemaker_studio: bool = setting(True, None, "COSTGUARD_SAGEMAKER_STUDIO")
    """Whether SageMaker Studio apps are listed."""

    queue_url: str | None = setting(None, None, "COSTGUARD_QUEUE_URL", org=True)
    """The Organization hub's FIFO work queue (the fan-out's only)."""

    act_queue_url: str | None = setting(None, None, "COSTGUARD_ACT_QUEUE_URL", org=True)
    """The Organization hub's FIFO guard queue: one guard in one member account per message (the
    fan-out's only)."""


@functools.cache
def _docstrings() -> dict[str, str]:
    """Each declared field's docstring, read from this file when the docs ask (pydantic's
    ``use_attribute_docstrings`` would parse it in every Lambda's cold start)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    declaration = {"ContextAndEnv", "ContextOnly", "EnvOnly"}
    return {
        field.target.id: " ".join(str(doc.value.value).split())
        for cls in tree.body
        if isinstance(cls, ast.ClassDef) and cls.name in declaration
        for field, doc in itertools.pairwise(cls.body)
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
        if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
    }


SETTINGS: Final[tuple[SettingSpec, ...]] = (
    _specs(ContextAndEnv) + _specs(ContextOnly) + _specs(EnvOnly)
)
BY_NAME: Final[Mapping[str, SettingSpec]] = {s.name: s for s in SETTINGS}
#: Deployed from CDK context, in the docs' order.
CONTEXT_SETTINGS: Final = tuple(s for s in SETTINGS if s.context_key)
#: Read by :meth:`costguard.settings.Settings.from_env`.
ENV_SETTINGS: Final = tuple(s for s in SETTINGS if s.env_var)
#: Deployed from CDK context, to every Lambda with a variable, in both modes.
SHARED_CONTEXT_SETTINGS: Final = tuple(s for s in CONTEXT_SETTINGS if not s.org)
#: Deployed from CDK context to the Organization hub's Lambdas only.
ORG_CONTEXT_SETTINGS: Final = tuple(s for s in CONTEXT_SETTINGS if s.org)


# -- the configuration reference (docs/configuration.md) ------------------------------------------

#: The generated table sits between these lines of docs/configuration.md.
TABLE_BEGIN: Final = "<!-- settings:begin (generated by `make docs`; edit config_spec.py) -->"
TABLE_END: Final = "<!-- settings:end -->"


def markdown_table() -> str:
    """The configuration table: every setting with a context key."""
    rows = [
        "| key | default | variable (Lambda and CLI) | meaning |",
        "|---|---|---|---|",
    ]
    for s in CONTEXT_SETTINGS:
        variable = f"`{s.env_var}`" if s.env_var else "deploy only"
        rows.append(f"| `{s.context_key}` | {s.shown_default()} | {variable} | {s.doc} |")
    return "\n".join(rows) + "\n"


def with_table(page: str) -> str:
    """``page`` with the text between its markers replaced by :func:`markdown_table`."""
    head, begin, rest = page.partition(TABLE_BEGIN)
    _, end, tail = rest.partition(TABLE_END)
    if not begin or not end:
        raise ValueError(f"the page has no {TABLE_BEGIN!r} ... {TABLE_END!r} block")
    return f"{head}{TABLE_BEGIN}\n{markdown_table()}{TABLE_END}{tail}"


if __name__ == "__main__":  # pragma: no cover - `python -m costguard.config_spec [PAGE]`
    if len(sys.argv) > 1:
        page = Path(sys.argv[1])
        page.write_text(with_table(page.read_text()))
    else:
        print(markdown_table(), end="")
