"""Findings: what a scan could not do, or found wrong, said so a person can act on it."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class FindingCode(StrEnum):
    MALFORMED_BUDGET = "malformed-budget"
    MALFORMED_EXEMPT = "malformed-exempt"
    MALFORMED_PROJECT = "malformed-project"
    MALFORMED_OWNER = "malformed-owner"
    MALFORMED_TTL = "malformed-ttl"
    MALFORMED_IDLE_MINUTES = "malformed-idle-minutes"
    MALFORMED_MAX_HOURS = "malformed-max-hours"
    MALFORMED_EXPIRES = "malformed-expires"
    MALFORMED_USD_PER_HOUR = "malformed-usd-per-hour"
    MALFORMED_REQUIRE_SPOT = "malformed-require-spot"
    #: A lifetime the guard cannot enforce: a group would replace the stopped instance, or
    #: the resource's launch time is after now (a clock that disagrees with AWS).
    LIFETIME_NOT_ENFORCED = "lifetime-not-enforced"
    BUDGET_CONFLICT = "budget-conflict"
    #: A costguard:team tag that is not a valid name (the project-name rules).
    MALFORMED_TEAM = "malformed-team"
    #: A project given two teams (by tags, or by a tag and the central table).
    TEAM_CONFLICT = "team-conflict"
    UNPRICED = "unpriced"
    EKS_VERSION_UNKNOWN = "eks-version-unknown"
    UNKNOWN_INSTANCE_TYPE = "unknown-instance-type"
    INSTANCE_TYPE_RETIRED = "instance-type-retired"
    PRICE_LOW_CONFIDENCE = "price-low-confidence"
    SPOT_PRICE_FALLBACK = "spot-price-fallback"
    PENDING_CAPACITY = "pending-capacity"
    UNATTRIBUTED = "unattributed"
    SCAN_FAILED = "scan-failed"
    #: A guard could not enter a member account (its act role is missing or denied).
    ACT_FAILED = "act-failed"
    #: An account-region of an Organization that is no longer scanned (the account was
    #: suspended, closed, opted out or unlisted; the region disabled or not allowed) whose
    #: spend earlier this month is still counted until the month ends.
    NOT_SCANNED = "not-scanned"
    LEDGER_CONTENDED = "ledger-contended"
    CONFIG = "config"
    #: The price catalog in use is stale, invalid, or holds a refreshed rate for review.
    PRICE_CATALOG = "price-catalog"
    #: An idle-notebook candidate publishes too few metrics to be judged (e.g. no GPU agent).
    IDLE_METRICS_MISSING = "idle-metrics-missing"
    #: A SageMaker notebook instance without CostGuard's heartbeat (lifecycle configuration).
    NO_HEARTBEAT = "notebook-no-heartbeat"
    #: An instance tagged a notebook that a group manages (Auto Scaling, EKS, Karpenter):
    #: never stopped, since the group would replace it.
    IDLE_MANAGED_INSTANCE = "idle-managed-instance"
    #: A Studio domain or space where Studio's own idle shutdown is off.
    STUDIO_IDLE_SHUTDOWN_OFF = "studio-idle-shutdown-off"
    #: A Studio domain that does not copy its spaces' tags to their apps, which IAM checks.
    STUDIO_TAGS_NOT_PROPAGATED = "studio-tags-not-propagated"


class Finding(NamedTuple):
    """One thing a person should know or fix, addressed to the resource it is about."""

    code: FindingCode
    resource: str
    message: str
    severity: Severity = Severity.WARNING

    def as_dict(self) -> dict[str, str]:
        return {
            "code": self.code.value,
            "resource": self.resource,
            "message": self.message,
            "severity": self.severity.value,
        }
