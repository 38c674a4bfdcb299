"""Deployment configuration from CDK context (defaults from the spec, ``-c key=value``).

Every field is declared once in :mod:`costguard.config_spec`, with its default, validation
and docs; this module only names the fields (for type checking) and reports errors.
Context given with ``-c`` arrives as strings, so every field also accepts its string form
(``-c dryRun=false``, ``-c regions=us-east-1,us-west-2``), read as the Lambda reads its
variable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from pydantic import ConfigDict, ValidationError, model_validator

from costguard.config_spec import (
    BY_NAME,
    CONTEXT_SETTINGS,
    LAMBDA_ENVIRONMENT_BYTES,
    ORG_CONTEXT_SETTINGS,
    ORG_DISCOVER,
    SHARED_CONTEXT_SETTINGS,
    STACK_VARIABLES_BYTES,
    ProjectEntry,
    SettingSpec,
    SpecModel,
    org_problem,
    rate_minutes,
)
from costguard.names import OrgRoles
from costguard.settings import one_line

#: Every context key CostGuard reads (the app reads only these from CDK's context).
CONTEXT_KEYS: tuple[str, ...] = tuple(s.context_key for s in CONTEXT_SETTINGS if s.context_key)
#: Context key -> field name, and back.
_FIELD_KEY = {s.name: s.context_key for s in CONTEXT_SETTINGS if s.context_key}
_OWN_MESSAGE = frozenset({"value_error", "assertion_error"})


class ConfigError(ValueError):
    """A context value is wrong; the message names the key and shows what was given."""


def _field(name: str) -> Any:
    return BY_NAME[name].field(alias=True)


class CostGuardConfig(SpecModel):
    """The deployment: the settings of the spec that have a context key."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    regions: tuple[str, ...] = _field("regions")
    scan_rate: str = _field("scan_rate")
    dry_run: bool = _field("dry_run")
    warning_pct: Decimal = _field("warning_pct")
    budget_thresholds: tuple[int, ...] = _field("budget_thresholds")
    ttl_hours: int = _field("ttl_hours")
    ebs_snapshot_before_delete: bool = _field("ebs_snapshot_before_delete")
    ebs_snapshot_ttl: str = _field("ebs_snapshot_ttl")
    s3_sweep_prefixes: tuple[str, ...] = _field("s3_sweep_prefixes")
    s3_keep_prefix: str = _field("s3_keep_prefix")
    s3_purge_noncurrent: bool = _field("s3_purge_noncurrent")
    s3_breaker_pct: int = _field("s3_breaker_pct")
    s3_breaker_max_gib: int = _field("s3_breaker_max_gib")
    s3_backstop: bool = _field("s3_backstop")
    anomaly_min_ratio: Decimal = _field("anomaly_min_ratio")
    anomaly_min_usd_per_hour: Decimal = _field("anomaly_min_usd_per_hour")
    anomaly_cooldown_minutes: int = _field("anomaly_cooldown_minutes")
    digest_hour_utc: int = _field("digest_hour_utc")
    scan_failed_alert_after: int = _field("scan_failed_alert_after")
    advice_alerts: bool = _field("advice_alerts")
    advice_min_monthly_usd: Decimal = _field("advice_min_monthly_usd")
    cost_explorer: bool = _field("cost_explorer")
    price_refresh_rate: str = _field("price_refresh_rate")
    price_change_hold_pct: Decimal = _field("price_change_hold_pct")
    price_catalog_max_age_days: int = _field("price_catalog_max_age_days")
    idle_minutes: int = _field("idle_minutes")
    idle_rate: str = _field("idle_rate")
    idle_gpu_pct: Decimal = _field("idle_gpu_pct")
    idle_cpu_pct: Decimal = _field("idle_cpu_pct")
    idle_network_mb: Decimal = _field("idle_network_mb")
    idle_max_runtime_hours: int = _field("idle_max_runtime_hours")
    idle_grace_minutes: int = _field("idle_grace_minutes")
    idle_all_accelerators: bool = _field("idle_all_accelerators")
    idle_gpu_discovery: Literal["search", "list"] = _field("idle_gpu_discovery")
    alert_emails: tuple[str, ...] = _field("alert_emails")
    slack_webhook_secret_name: str = _field("slack_webhook_secret_name")
    project_tag_keys: tuple[str, ...] = _field("project_tag_keys")
    projects: dict[str, ProjectEntry] = _field("projects")
    log_retention_days: int = _field("log_retention_days")
    scan_memory_mb: int = _field("scan_memory_mb")
    scan_timeout_seconds: int = _field("scan_timeout_seconds")
    org_accounts: tuple[str, ...] = _field("org_accounts")
    org_id: str = _field("org_id")
    org_member_role: str = _field("org_member_role")
    org_per_account_concurrency: int = _field("org_per_account_concurrency")
    org_max_concurrency: int = _field("org_max_concurrency")
    org_probe_hours: int = _field("org_probe_hours")
    org_slice_deadline_minutes: int = _field("org_slice_deadline_minutes")
    org_opt_out_tag: str = _field("org_opt_out_tag")
    org_regions: Literal["listed", "enabled"] = _field("org_regions")
    org_max_receives: int = _field("org_max_receives")

    @model_validator(mode="after")
    def _org_complete(self) -> CostGuardConfig:
        problem = org_problem(self.org_accounts, self.org_id, accounts_name="`orgAccounts`")
        if problem:
            raise ValueError(f"`orgId` {problem}, got nothing")
        if self.org_member_role.casefold() == OrgRoles.MEMBER_ACT.casefold():
            # The scan consumers would be granted the guards' role: they could act.
            raise ValueError(
                f"`orgMemberRole` must not be `{OrgRoles.MEMBER_ACT}`, the guards' act role "
                "(the read role is a separate, read-only role), got "
                f"`{self.org_member_role}`"
            )
        if self.org_mode and self.cost_explorer:
            # Each slice is scanned through the member read role, which grants no Cost
            # Explorer: every scan would report a failing source instead of reconciling.
            raise ValueError(
                "`costExplorer` is not available with `orgAccounts` yet (the member roles "
                "grant no Cost Explorer); leave it false"
            )
        return self

    @property
    def org_mode(self) -> bool:
        """An Organization hub (``orgAccounts`` set), not a single-account deployment."""
        return bool(self.org_accounts)

    @property
    def org_discover(self) -> bool:
        """The hub lists the Organization's accounts (and may read their tags)."""
        return self.org_accounts == (ORG_DISCOVER,)

    @property
    def price_refresh_minutes(self) -> int:
        return rate_minutes(self.price_refresh_rate)

    @property
    def scan_rate_minutes(self) -> int:
        return rate_minutes(self.scan_rate)

    def environment(self) -> dict[str, str]:
        """The scan Lambda's variables for every setting that has one and a context key,
        except the Organization hub's (:meth:`org_environment`).

        The stack adds the runtime-only ones (table, topic, scope…); ``Settings.from_env``
        reads them all back to the same values (tests/infra/test_config.py).
        """
        return self._variables(SHARED_CONTEXT_SETTINGS)

    def org_environment(self) -> dict[str, str]:
        """The variables only the Organization hub's Lambdas get (on top of :meth:`environment`)."""
        return self._variables(ORG_CONTEXT_SETTINGS)

    def _variables(self, specs: tuple[SettingSpec, ...]) -> dict[str, str]:
        return {s.env_var: s.to_env(getattr(self, s.name)) for s in specs if s.env_var is not None}

    def environment_problem(self) -> str | None:
        """Why the largest Lambda environment (the scan's, or in Organization mode the hub
        consumer's) would not fit AWS Lambda's 4 KB, if it would not."""
        deployed = CONTEXT_SETTINGS if self.org_mode else SHARED_CONTEXT_SETTINGS
        sizes = {
            # As JSON: Lambda counts the encoding too (quotes, and the escapes in JSON values).
            s.context_key: len(json.dumps({s.env_var: s.to_env(getattr(self, s.name))}).encode())
            for s in deployed
            if s.env_var is not None and s.context_key is not None
        }
        room = LAMBDA_ENVIRONMENT_BYTES - STACK_VARIABLES_BYTES
        if sum(sizes.values()) <= room:
            return None
        largest = sorted(sizes, key=lambda k: -sizes[k])[:2]
        which = "the hub consumer Lambda's" if self.org_mode else "the scan Lambda's"
        hint = (
            f" (with many accounts, use `-c orgAccounts={ORG_DISCOVER}` and opt accounts out by tag)"
            if largest[0] == "orgAccounts"
            else ""
        )
        return (
            f"`{largest[0]}` makes {which} environment too large{hint}: the settings take "
            f"{sum(sizes.values())} bytes, and AWS Lambda allows {LAMBDA_ENVIRONMENT_BYTES} "
            f"in all ({room} with what the stack adds); largest: "
            + ", ".join(f"`{k}` {sizes[k]} bytes" for k in largest)
        )

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> CostGuardConfig:
        """Validate CDK context; errors read "`key` must be ..., got ..." per bad key."""
        raw = {k: v for k, v in context.items() if k in CONTEXT_KEYS and v is not None}
        try:
            config = cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError("invalid CostGuard context: " + "; ".join(_problems(exc))) from None
        problem = config.environment_problem()
        if problem:
            raise ConfigError(f"invalid CostGuard context: {problem}")
        return config


def _problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if not loc:  # a check across keys (the model's): its message names them
            problems.append(one_line(message, 300))
            continue
        head = _FIELD_KEY.get(str(loc[0]), str(loc[0]))
        where = f"`{head}`" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
        if err["type"] not in _OWN_MESSAGE and ", got " not in message:
            message += f", got {err.get('input')!r}"
        problems.append(one_line(f"{where} {message}", 300))
    return problems
