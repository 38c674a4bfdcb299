"""What CostGuard writes for people and alarms to watch: the CloudWatch metrics alarms need,
and the structured log lines (figures) the dashboard queries. One source of truth for these
names, shared by the Lambdas and the CDK dashboard and alarms.
"""

from __future__ import annotations

from typing import Final


class Figures:
    """The structured log line each scan writes per project, which the dashboard queries.

    Per-project figures go to logs, not to custom metrics: at $0.30 a metric-month, four
    metrics for each of 20 projects cost more than the rest of CostGuard together, while a
    log line costs a few cents a month. Custom metrics are kept for what alarms need.
    """

    EVENT_KEY: Final = "event"
    EVENT: Final = "project-figures"
    PROJECT: Final = "project"
    BUDGET: Final = "budget_usd"
    MONTH_TO_DATE: Final = "month_to_date_usd"
    #: The month-to-date by category, to the cent, adding up to MONTH_TO_DATE: compute,
    #: storage, and not split (accrued before the ledger split months by category).
    MONTH_TO_DATE_COMPUTE: Final = "month_to_date_compute_usd"
    MONTH_TO_DATE_STORAGE: Final = "month_to_date_storage_usd"
    MONTH_TO_DATE_NOT_SPLIT: Final = "month_to_date_not_split_usd"
    FORECAST: Final = "forecast_month_usd"
    RUN_RATE: Final = "run_rate_usd_per_hour"
    STATUS: Final = "status"
    #: The project's team on its line (null: none); a team's own line is TEAM_EVENT.
    TEAM: Final = "team"
    #: Written by each scan per team: the sums of its projects, its budget and status.
    TEAM_EVENT: Final = "team-figures"
    #: Written by each scan: which price catalog it used and how old it is.
    CATALOG_EVENT: Final = "price-catalog"
    CATALOG_SOURCE: Final = "source"
    CATALOG_VERSION: Final = "version"
    CATALOG_AS_OF: Final = "as_of"
    CATALOG_AGE_DAYS: Final = "age_days"
    CATALOG_STALE: Final = "stale"
    #: Written by the executor for each action taken (or that dry-run would take).
    ACTION_EVENT: Final = "action"
    SAVINGS: Final = "usd_per_month_saved"
    OUTCOME: Final = "outcome"


class Metrics:
    """CloudWatch metrics: only what alarms need (per-project figures are :class:`Figures`)."""

    NAMESPACE: Final = "CostGuard"
    SCAN_COMPLETED: Final = "ScanCompleted"
    FINDINGS: Final = "Findings"
    #: Powertools adds this dimension to the handler's own metrics.
    DIMENSION_SERVICE: Final = "service"
    SCAN_SERVICE: Final = "costguard-scan"
    LAUNCH_SERVICE: Final = "costguard-on-launch"
    REFRESH_SERVICE: Final = "costguard-price-refresh"
    #: The Organization hub's Lambdas (Powertools' service name).
    ORG_FANOUT_SERVICE: Final = "costguard-org-fanout"
    ORG_CONSUMER_SERVICE: Final = "costguard-org-consumer"
    ORG_ACT_SERVICE: Final = "costguard-org-act"
