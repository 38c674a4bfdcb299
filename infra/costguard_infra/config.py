"""Deployment configuration from CDK context (``cdk.json`` defaults, ``-c key=value``).

Context given with ``-c`` arrives as strings, so every field also accepts its
string form (``-c dryRun=false``, ``-c regions=us-east-1,us-west-2``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from costguard.names import Tags
from costguard.settings import REGION, ProjectEntry, valid_thresholds

RATE = re.compile(r"^(?P<n>\d+) (?P<unit>minute|minutes|hour|hours|day|days)$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
CONTEXT_KEYS = (
    "regions",
    "scanRate",
    "dryRun",
    "warningPct",
    "budgetThresholds",
    "ttlHours",
    "alertEmails",
    "slackWebhookSecretName",
    "projectTagKeys",
    "projects",
    "logRetentionDays",
    "scanMemoryMb",
    "scanTimeoutSeconds",
    "anomalyMinRatio",
    "anomalyMinUsdPerHour",
    "anomalyCooldownMinutes",
    "digestHourUtc",
    "scanFailedAlertAfter",
    "costExplorer",
)


class ConfigError(ValueError):
    """A context value is wrong; the message names the key and shows what was given."""


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [p.strip() for p in text.split(",") if p.strip()]
    return value


class CostGuardConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    regions: tuple[str, ...] = Field(default=("us-east-1",), min_length=1)
    scan_rate: str = Field(default="15 minutes", alias="scanRate")
    dry_run: bool = Field(default=True, alias="dryRun")
    warning_pct: int = Field(default=80, alias="warningPct", gt=0, le=100)
    budget_thresholds: tuple[int, ...] = Field(default=(50, 80, 100), alias="budgetThresholds")
    ttl_hours: int = Field(default=48, alias="ttlHours", ge=1, le=24 * 365)
    alert_emails: tuple[str, ...] = Field(default=(), alias="alertEmails")
    slack_webhook_secret_name: str = Field(
        default="costguard/slack-webhook", alias="slackWebhookSecretName"
    )
    project_tag_keys: tuple[str, ...] = Field(
        default=(Tags.PROJECT, *Tags.PROJECT_FALLBACKS), alias="projectTagKeys", min_length=1
    )
    projects: dict[str, ProjectEntry] = Field(default_factory=dict)
    log_retention_days: int = Field(default=90, alias="logRetentionDays")
    scan_memory_mb: int = Field(default=1024, alias="scanMemoryMb", ge=128, le=10240)
    scan_timeout_seconds: int = Field(default=600, alias="scanTimeoutSeconds", ge=30, le=900)
    anomaly_min_ratio: Decimal = Field(default=Decimal(2), alias="anomalyMinRatio", ge=1)
    anomaly_min_usd_per_hour: Decimal = Field(
        default=Decimal(10), alias="anomalyMinUsdPerHour", ge=0
    )
    anomaly_cooldown_minutes: int = Field(default=60, alias="anomalyCooldownMinutes", ge=0)
    digest_hour_utc: int = Field(default=8, alias="digestHourUtc", ge=0, le=23)
    scan_failed_alert_after: int = Field(default=3, alias="scanFailedAlertAfter", ge=1, le=1000)
    cost_explorer: bool = Field(default=False, alias="costExplorer")

    @field_validator(
        "regions", "alert_emails", "project_tag_keys", "budget_thresholds", mode="before"
    )
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _csv(value)

    @field_validator("projects", mode="before")
    @classmethod
    def _projects(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [r for r in value if not REGION.match(r)]
        if bad:
            raise ValueError(
                f"must be AWS region names like us-east-1, got {', '.join(map(repr, bad))}"
            )
        return tuple(dict.fromkeys(value))

    @field_validator("scan_rate")
    @classmethod
    def _rate(cls, value: str) -> str:
        match = RATE.match(value.strip())
        if not match:
            raise ValueError(f"must be a rate like `15 minutes`, got `{value}`")
        n, unit = int(match["n"]), match["unit"]
        if n == 0 or (n == 1) != (not unit.endswith("s")):
            raise ValueError(f"must be a rate like `15 minutes` or `1 hour`, got `{value}`")
        if unit.startswith("minute") and n < 5:
            raise ValueError(
                f"must be at least `5 minutes` (each scan costs API calls), got `{value}`"
            )
        return value.strip()

    @field_validator("alert_emails")
    @classmethod
    def _emails(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [e for e in value if not EMAIL.match(e)]
        if bad:
            raise ValueError(f"must be e-mail addresses, got {', '.join(map(repr, bad))}")
        return value

    @field_validator("budget_thresholds")
    @classmethod
    def _thresholds(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        return valid_thresholds(value)

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        allowed = (
            1,
            3,
            5,
            7,
            14,
            30,
            60,
            90,
            120,
            150,
            180,
            365,
            400,
            545,
            731,
            1096,
            1827,
            2192,
            2557,
            2922,
            3288,
            3653,
        )
        if value not in allowed:
            raise ValueError(
                f"must be one of CloudWatch's retention periods {allowed}, got {value}"
            )
        return value

    @property
    def scan_rate_minutes(self) -> int:
        match = RATE.match(self.scan_rate)
        assert match is not None
        n, unit = int(match["n"]), match["unit"]
        return n * (1 if unit.startswith("minute") else 60 if unit.startswith("hour") else 1440)

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> CostGuardConfig:
        """Validate CDK context; errors read "`key` must be ..., got ..." per bad key."""
        raw = {k: v for k, v in context.items() if k in CONTEXT_KEYS and v is not None}
        try:
            config = cls.model_validate(raw)
            for name, entry in config.projects.items():
                entry.to_domain(name)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                key = str(err["loc"][0]) if err["loc"] else "?"
                field = cls.model_fields.get(key)
                name = field.alias if field is not None and field.alias else key
                message = str(err["msg"]).removeprefix("Value error, ")
                if ", got " not in message:
                    message += f", got {err.get('input')!r}"
                problems.append(f"`{name}` {message}")
            raise ConfigError("invalid CostGuard context: " + "; ".join(problems)) from None
        except ValueError as exc:
            raise ConfigError(f"invalid CostGuard context: `projects` {exc}") from None
        return config
