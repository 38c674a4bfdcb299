"""Runtime settings for the Lambdas and the CLI, read once from the environment.

Each field is declared in :mod:`costguard.config_spec` (default, validation, variable name,
docs); this module only reads the variables. The names are :class:`costguard.names.Env`,
which the CDK stack also uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from pydantic import ValidationError

from costguard.config_spec import (
    BY_NAME,
    ENV_SETTINGS,
    REGION,
    Kind,
    ProjectEntry,
    SpecModel,
    org_problem,
    project_table,
    valid_thresholds,
)
from costguard.domain.attribution import ProjectConfig
from costguard.domain.tags import TagKeys

__all__ = [
    "ENV_VARS",
    "FIELD_ENV",
    "ORG_ENV_VARS",
    "REGION",
    "ProjectEntry",
    "Settings",
    "SettingsError",
    "one_line",
    "valid_thresholds",
    "validation_problems",
]

#: Every environment variable :meth:`Settings.from_env` reads (the stack must set them all).
ENV_VARS: tuple[str, ...] = tuple(s.env_var for s in ENV_SETTINGS if s.env_var)
#: Those only an Organization hub's Lambdas get (unset: one account).
ORG_ENV_VARS: tuple[str, ...] = tuple(s.env_var for s in ENV_SETTINGS if s.env_var and s.org)


class SettingsError(ValueError):
    """The configuration is wrong; the message says which variable and why."""

    @classmethod
    def of(cls, problems: list[str]) -> SettingsError:
        """One problem on the heading's line; several as ``field: message`` lines under it."""
        if len(problems) == 1:
            return cls(f"invalid CostGuard settings: {problems[0]}")
        return cls("invalid CostGuard settings:\n" + "\n".join(f"  {p}" for p in problems))


#: Settings field -> the environment variable it is read from, so errors name what to fix.
FIELD_ENV: dict[str, str] = {s.name: s.env_var for s in ENV_SETTINGS if s.env_var}

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


def _field(name: str, *, required: bool = False) -> Any:
    return BY_NAME[name].field(required=required)


class Settings(SpecModel):
    """What the Lambdas and the CLI run with: the settings of the spec that have a variable."""

    regions: tuple[str, ...] = _field("regions", required=True)
    table_name: str | None = _field("table_name")
    scope: str = _field("scope")
    dry_run: bool = _field("dry_run")
    scan_rate: str = _field("scan_rate")
    warning_pct: Decimal = _field("warning_pct")
    project_tag_keys: tuple[str, ...] = _field("project_tag_keys")
    projects: dict[str, ProjectEntry] = _field("projects")
    sagemaker_tags: Literal["tagging-api", "per-resource"] = _field("sagemaker_tags")
    sagemaker_studio: bool = _field("sagemaker_studio")
    topic_arn: str | None = _field("topic_arn")
    guard: str | None = _field("guard")
    budget_thresholds: tuple[int, ...] = _field("budget_thresholds")
    anomaly_min_ratio: Decimal = _field("anomaly_min_ratio")
    anomaly_min_usd_per_hour: Decimal = _field("anomaly_min_usd_per_hour")
    anomaly_cooldown_minutes: int = _field("anomaly_cooldown_minutes")
    digest_hour_utc: int = _field("digest_hour_utc")
    #: Alert when a source (region/service) fails this many scans in a row.
    scan_failed_alert_after: int = _field("scan_failed_alert_after")
    advice_alerts: bool = _field("advice_alerts")
    advice_min_monthly_usd: Decimal = _field("advice_min_monthly_usd")
    #: Reconcile with Cost Explorer and forward its anomalies ($0.01 a request, 3 windows a day).
    cost_explorer: bool = _field("cost_explorer")
    price_change_hold_pct: Decimal = _field("price_change_hold_pct")
    price_catalog_max_age_days: int = _field("price_catalog_max_age_days")
    idle_minutes: int = _field("idle_minutes")
    idle_gpu_pct: Decimal = _field("idle_gpu_pct")
    idle_cpu_pct: Decimal = _field("idle_cpu_pct")
    idle_network_mb: Decimal = _field("idle_network_mb")
    idle_max_runtime_hours: int = _field("idle_max_runtime_hours")
    idle_grace_minutes: int = _field("idle_grace_minutes")
    idle_all_accelerators: bool = _field("idle_all_accelerators")
    idle_gpu_discovery: Literal["search", "list"] = _field("idle_gpu_discovery")
    #: Stale data: the default time to live, and how EBS volumes are backed up first.
    ttl_hours: int = _field("ttl_hours")
    ebs_snapshot_before_delete: bool = _field("ebs_snapshot_before_delete")
    ebs_snapshot_ttl: str = _field("ebs_snapshot_ttl")
    s3_sweep_prefixes: tuple[str, ...] = _field("s3_sweep_prefixes")
    s3_keep_prefix: str = _field("s3_keep_prefix")
    s3_purge_noncurrent: bool = _field("s3_purge_noncurrent")
    s3_breaker_pct: int = _field("s3_breaker_pct")
    s3_breaker_max_gib: int = _field("s3_breaker_max_gib")
    s3_backstop: bool = _field("s3_backstop")
    #: Organization mode (the hub's fan-out and consumer Lambdas; unset elsewhere).
    org_accounts: tuple[str, ...] = _field("org_accounts")
    org_id: str = _field("org_id")
    org_member_role: str = _field("org_member_role")
    org_per_account_concurrency: int = _field("org_per_account_concurrency")
    org_probe_hours: int = _field("org_probe_hours")
    org_slice_deadline_minutes: int = _field("org_slice_deadline_minutes")
    org_opt_out_tag: str = _field("org_opt_out_tag")
    org_regions: Literal["listed", "enabled"] = _field("org_regions")
    queue_url: str | None = _field("queue_url")
    act_queue_url: str | None = _field("act_queue_url")

    @property
    def tag_keys(self) -> TagKeys:
        return TagKeys(project=self.project_tag_keys)

    def project_table(self) -> dict[str, ProjectConfig]:
        """The central table, names normalised as project tags are (see config_spec)."""
        return project_table(self.projects)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build settings from environment variables, with errors that name the variable.

        An empty variable is unset, except a flag (``COSTGUARD_DRY_RUN=`` is an error, not
        the default), a setting without a default (``COSTGUARD_REGIONS=`` is an error) and a
        setting for which empty is a value of its own (``COSTGUARD_S3_KEEP_PREFIX=``: no keep
        prefix; :attr:`SettingSpec.empty_is_value`), which the stack writes for ``-c key=``.
        An unset variable falls back to its spec's ``env_fallbacks``: without
        ``COSTGUARD_REGIONS`` the region the Lambda or the CLI runs in is scanned.
        """
        raw: dict[str, str] = {}
        missing = []
        for spec in ENV_SETTINGS:
            assert spec.env_var is not None
            required = cls.model_fields[spec.name].is_required()
            text = environ.get(spec.env_var)
            empty_means_unset = spec.kind is not Kind.FLAG and not required
            if text is None or (text == "" and empty_means_unset and not spec.empty_is_value):
                text = next((environ[f] for f in spec.env_fallbacks if environ.get(f)), None)
            if text is not None:
                raw[spec.name] = text
            elif required:
                nor = "".join(f", nor {f}" for f in spec.env_fallbacks)
                missing.append(f"{spec.env_var} is not set{nor} (e.g. {spec.to_env(spec.default)})")
        if missing:
            raise SettingsError.of(missing)
        try:
            settings = cls.model_validate(raw)
        except ValidationError as exc:
            # ``from None``: the chained pydantic text would bring its links back into logs.
            raise SettingsError.of(validation_problems(exc, FIELD_ENV)) from None
        try:
            settings.project_table()  # names and owners held to the tag contract
        except ValueError as exc:
            raise SettingsError.of([one_line(f"{FIELD_ENV['projects']}: {exc}")]) from None
        problem = org_problem(
            settings.org_accounts, settings.org_id, accounts_name=FIELD_ENV["org_accounts"]
        )
        if problem:
            raise SettingsError.of([f"{FIELD_ENV['org_id']}: {problem}"])
        return settings
