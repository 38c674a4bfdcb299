"""Runtime settings for the Lambdas and the CLI, read once from the environment.

The variable names are :class:`costguard.names.Env`, which the CDK stack also uses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from costguard.domain.attribution import ProjectConfig
from costguard.domain.tags import TagKeys, parse_budget, parse_owners, parse_project
from costguard.names import Env, Tags

REGION = re.compile(r"\A[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}\Z")


#: Every environment variable :meth:`Settings.from_env` reads (the stack must set them all).
ENV_VARS = (
    Env.REGIONS,
    Env.TABLE_NAME,
    Env.SCOPE,
    Env.DRY_RUN,
    Env.WARNING_PCT,
    Env.PROJECT_TAG_KEYS,
    Env.PROJECTS_JSON,
    Env.SAGEMAKER_TAGS,
    Env.SAGEMAKER_STUDIO,
    Env.TOPIC_ARN,
    Env.BUDGET_THRESHOLDS,
    Env.ANOMALY_MIN_RATIO,
    Env.ANOMALY_MIN_USD_PER_HOUR,
    Env.ANOMALY_COOLDOWN_MINUTES,
    Env.DIGEST_HOUR_UTC,
    Env.SCAN_FAILED_ALERT_AFTER,
    Env.COST_EXPLORER,
)


def valid_thresholds(value: tuple[int, ...]) -> tuple[int, ...]:
    """Budget alert thresholds: percentages of the budget, sorted, without repeats."""
    if not value or any(not 0 < t <= 1000 for t in value):
        raise ValueError(f"must be percentages between 1 and 1000, got {list(value)}")
    return tuple(sorted(set(value)))


class SettingsError(ValueError):
    """The configuration is wrong; the message says which variable and why."""

    @classmethod
    def of(cls, problems: list[str]) -> SettingsError:
        """One problem on the heading's line; several as ``field: message`` lines under it."""
        if len(problems) == 1:
            return cls(f"invalid CostGuard settings: {problems[0]}")
        return cls("invalid CostGuard settings:\n" + "\n".join(f"  {p}" for p in problems))


#: Settings field -> the environment variable it is read from, so errors name what to fix.
FIELD_ENV: dict[str, str] = {
    "regions": Env.REGIONS,
    "table_name": Env.TABLE_NAME,
    "scope": Env.SCOPE,
    "dry_run": Env.DRY_RUN,
    "warning_pct": Env.WARNING_PCT,
    "project_tag_keys": Env.PROJECT_TAG_KEYS,
    "projects": Env.PROJECTS_JSON,
    "sagemaker_tags": Env.SAGEMAKER_TAGS,
    "sagemaker_studio": Env.SAGEMAKER_STUDIO,
    "topic_arn": Env.TOPIC_ARN,
    "budget_thresholds": Env.BUDGET_THRESHOLDS,
    "anomaly_min_ratio": Env.ANOMALY_MIN_RATIO,
    "anomaly_min_usd_per_hour": Env.ANOMALY_MIN_USD_PER_HOUR,
    "anomaly_cooldown_minutes": Env.ANOMALY_COOLDOWN_MINUTES,
    "digest_hour_utc": Env.DIGEST_HOUR_UTC,
    "cost_explorer": Env.COST_EXPLORER,
    "scan_failed_alert_after": Env.SCAN_FAILED_ALERT_AFTER,
}

#: Error types whose message is ours (a validator's ``ValueError``) and already says what was given.
_OWN_MESSAGE = frozenset({"value_error", "assertion_error", "missing", "extra_forbidden"})


def one_line(text: str, limit: int = 200) -> str:
    """Control characters (newlines, escapes) shown escaped: one error is one terminal line."""
    flat = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text.strip())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def validation_problems(exc: ValidationError, names: Mapping[str, str] | None = None) -> list[str]:
    """A pydantic error as ``field: message`` lines, without pydantic's documentation links.

    ``names`` renames a top-level field to what the user actually wrote (an environment
    variable, a command-line option); nested places follow as ``.key`` or ``[index]``.
    """
    names = names or {}
    problems = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        head = names.get(str(loc[0]), str(loc[0])) if loc else "value"
        where = head + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        given: Any = err.get("input")
        if err["type"] in _OWN_MESSAGE:
            pass
        elif isinstance(given, str | int | float | Decimal):
            message += f" (got {one_line(repr(given), 60)})"
        elif given is not None:
            message += f" (got {type(given).__name__})"
        problems.append(one_line(f"{where}: {message}"))
    return problems


class ProjectEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    budget: str | float | int | None = None
    owners: tuple[str, ...] = ()

    def to_domain(self, name: str) -> ProjectConfig:
        budget = None
        if self.budget is not None:
            parsed = parse_budget(str(self.budget))
            if isinstance(parsed, str):
                raise ValueError(f"project {name!r}: budget {self.budget!r} {parsed}")
            budget = parsed
        owners: list[str] = []
        for raw in self.owners:
            parsed_owners = parse_owners(raw)
            if parsed_owners.problem is not None:
                raise ValueError(f"project {name!r}: owner {raw!r}: {parsed_owners.problem}")
            owners.extend(parsed_owners.valid)
        return ProjectConfig(budget, tuple(dict.fromkeys(owners)))


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    regions: tuple[str, ...] = Field(min_length=1)
    table_name: str | None = None
    scope: str = "default"
    dry_run: bool = True
    warning_pct: Decimal = Field(default=Decimal(80), gt=0, le=100)
    project_tag_keys: tuple[str, ...] = (Tags.PROJECT, *Tags.PROJECT_FALLBACKS)
    projects: dict[str, ProjectEntry] = Field(default_factory=dict)
    sagemaker_tags: Literal["tagging-api", "per-resource"] = "tagging-api"
    sagemaker_studio: bool = True
    topic_arn: str | None = None
    budget_thresholds: tuple[int, ...] = (50, 80, 100)
    anomaly_min_ratio: Decimal = Field(default=Decimal(2), ge=1)
    anomaly_min_usd_per_hour: Decimal = Field(default=Decimal(10), ge=0)
    anomaly_cooldown_minutes: int = Field(default=60, ge=0)
    digest_hour_utc: int = Field(default=8, ge=0, le=23)
    #: Alert when a source (region/service) fails this many scans in a row.
    scan_failed_alert_after: int = Field(default=3, ge=1, le=1000)
    #: Reconcile with Cost Explorer and forward its anomalies ($0.01 a request, 3 windows a day).
    cost_explorer: bool = False

    @field_validator("budget_thresholds")
    @classmethod
    def _thresholds(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(not 0 < t <= 1000 for t in value):
            raise ValueError(
                f"budget thresholds must be percentages between 1 and 1000, got {list(value)}"
            )
        return tuple(sorted(set(value)))

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [r for r in value if not REGION.match(r)]
        if bad:
            raise ValueError(f"not AWS region names: {', '.join(bad)} (expected e.g. us-east-1)")
        return tuple(dict.fromkeys(value))

    @property
    def tag_keys(self) -> TagKeys:
        return TagKeys(project=self.project_tag_keys)

    def project_table(self) -> dict[str, ProjectConfig]:
        """The central table, its names normalised exactly as project tags are.

        A name pasted with a no-break space, or typed full-width, is the same project
        as the tag typed plainly; a name the tag contract refuses is an error here.
        """
        table: dict[str, ProjectConfig] = {}
        for raw, entry in self.projects.items():
            name, why = parse_project(raw)
            if name is None:
                raise ValueError(f"project {raw!r} {why}")
            if name in table:
                raise ValueError(f"projects {raw!r} and another entry are both {name!r}")
            table[name] = entry.to_domain(name)
        return table

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from environment variables, with errors that name the variable."""
        raw: dict[str, object] = {}

        def csv(name: str) -> tuple[str, ...]:
            return tuple(p.strip() for p in environ[name].split(",") if p.strip())

        if Env.REGIONS in environ:
            raw["regions"] = csv(Env.REGIONS)
        elif environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"):
            raw["regions"] = (environ.get("AWS_REGION") or environ["AWS_DEFAULT_REGION"],)
        else:
            raise SettingsError(
                f"{Env.REGIONS} is not set (comma-separated regions, e.g. us-east-1,us-west-2)"
            )
        for field_name, env in (
            ("table_name", Env.TABLE_NAME),
            ("scope", Env.SCOPE),
            ("warning_pct", Env.WARNING_PCT),
            ("sagemaker_tags", Env.SAGEMAKER_TAGS),
            ("topic_arn", Env.TOPIC_ARN),
            ("anomaly_min_ratio", Env.ANOMALY_MIN_RATIO),
            ("anomaly_min_usd_per_hour", Env.ANOMALY_MIN_USD_PER_HOUR),
            ("anomaly_cooldown_minutes", Env.ANOMALY_COOLDOWN_MINUTES),
            ("digest_hour_utc", Env.DIGEST_HOUR_UTC),
            ("scan_failed_alert_after", Env.SCAN_FAILED_ALERT_AFTER),
        ):
            if environ.get(env):
                raw[field_name] = environ[env]
        for field_name, env in (
            ("dry_run", Env.DRY_RUN),
            ("sagemaker_studio", Env.SAGEMAKER_STUDIO),
            ("cost_explorer", Env.COST_EXPLORER),
        ):
            if env in environ:
                flag = environ[env].strip().lower()
                if flag not in {"true", "false", "1", "0"}:
                    raise SettingsError(f"{env} must be true or false, got {environ[env]!r}")
                raw[field_name] = flag in {"true", "1"}
        if environ.get(Env.BUDGET_THRESHOLDS):
            raw["budget_thresholds"] = csv(Env.BUDGET_THRESHOLDS)
        if environ.get(Env.PROJECT_TAG_KEYS):
            raw["project_tag_keys"] = csv(Env.PROJECT_TAG_KEYS)
        if environ.get(Env.PROJECTS_JSON):
            try:
                raw["projects"] = json.loads(environ[Env.PROJECTS_JSON])
            except json.JSONDecodeError as exc:
                raise SettingsError(f"{Env.PROJECTS_JSON} is not valid JSON: {exc}") from None
        try:
            settings = cls.model_validate(raw)
        except ValidationError as exc:
            # ``from None``: the chained pydantic text would bring its links back into logs.
            raise SettingsError.of(validation_problems(exc, FIELD_ENV)) from None
        try:
            settings.project_table()
        except ValueError as exc:
            raise SettingsError.of([one_line(f"{Env.PROJECTS_JSON}: {exc}")]) from None
        return settings
