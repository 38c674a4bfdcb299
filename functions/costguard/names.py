"""The one source of truth for names shared by the Lambdas, the CDK app and the docs.

Tag keys are the public contract with users; environment-variable names are the
contract between the CDK stack and the handlers; metric names feed the dashboard.
"""

from __future__ import annotations

from typing import Final


class Tags:
    """Tag keys that CostGuard reads on resources."""

    PROJECT: Final = "costguard:project"
    BUDGET: Final = "costguard:budget"
    OWNER: Final = "costguard:owner"
    EXEMPT: Final = "costguard:exempt"
    #: Written by CostGuard when it warns: the UTC time after which it acts.
    ACTION_AFTER: Final = "costguard:action-after"
    #: Puts an EC2 instance in the idle-notebook guard's scope: ``notebook``.
    ROLE: Final = "costguard:role"
    #: Per-resource idle window in minutes, overriding the deployment's default.
    IDLE_MINUTES: Final = "costguard:idle-minutes"
    #: Opts an S3 bucket or an EBS snapshot into the stale-data sweep: ``48h``, ``7d``.
    TTL: Final = "costguard:ttl"
    #: Written by CostGuard on the snapshot it takes of a volume before deleting it.
    SOURCE_VOLUME: Final = "costguard:source-volume"
    #: Lets a stale-object sweep the breaker stopped go on: the UTC date (YYYY-MM-DD) the
    #: owner confirmed, on or after the trip.
    CONFIRM_DELETE: Final = "costguard:confirm-delete"
    #: On an AWS account (Organizations): ``true`` keeps the hub out of it. Configurable.
    ORG_OPT_OUT: Final = "costguard:opt-out"
    #: Accepted, in order, when ``costguard:project`` is absent. Configurable.
    PROJECT_FALLBACKS: Final = ("Project", "project")

    # Tags that AWS itself puts on EC2 instances of EKS managed node groups / Karpenter.
    EKS_CLUSTER: Final = "eks:cluster-name"
    EKS_NODEGROUP: Final = "eks:nodegroup-name"
    AWS_EKS_CLUSTER: Final = "aws:eks:cluster-name"
    KARPENTER_NODEPOOL: Final = "karpenter.sh/nodepool"
    KARPENTER_CLUSTER_PREFIX: Final = "kubernetes.io/cluster/"
    KARPENTER_PROVISIONER: Final = "karpenter.sh/provisioner-name"
    # Tags that AWS puts on the instances of a group that replaces a stopped member.
    AUTOSCALING_GROUP: Final = "aws:autoscaling:groupName"
    EC2_FLEET: Final = "aws:ec2:fleet-id"
    SPOT_FLEET: Final = "aws:ec2spot:fleet-request-id"
    EMR_CLUSTER: Final = "aws:elasticmapreduce:job-flow-id"


class Env:
    """Environment variables that the handlers read and the CDK stack sets.

    Each ``COSTGUARD_*`` setting's variable is tied to its default, validation and context
    key in :mod:`costguard.config_spec`; a variable added here without a spec entry fails
    tests/unit/test_settings_spec.py.
    """

    REGIONS: Final = "COSTGUARD_REGIONS"
    TABLE_NAME: Final = "COSTGUARD_TABLE_NAME"
    SCOPE: Final = "COSTGUARD_SCOPE"
    DRY_RUN: Final = "COSTGUARD_DRY_RUN"
    #: The scan's (and the hub's ticks') schedule rate, e.g. ``15 minutes``.
    SCAN_RATE: Final = "COSTGUARD_SCAN_RATE"
    WARNING_PCT: Final = "COSTGUARD_WARNING_PCT"
    PROJECT_TAG_KEYS: Final = "COSTGUARD_PROJECT_TAG_KEYS"
    PROJECTS_JSON: Final = "COSTGUARD_PROJECTS_JSON"
    SAGEMAKER_TAGS: Final = "COSTGUARD_SAGEMAKER_TAGS"
    SAGEMAKER_STUDIO: Final = "COSTGUARD_SAGEMAKER_STUDIO"
    TOPIC_ARN: Final = "COSTGUARD_TOPIC_ARN"
    GUARD: Final = "COSTGUARD_GUARD"
    TTL_HOURS: Final = "COSTGUARD_TTL_HOURS"
    EBS_SNAPSHOT_BEFORE_DELETE: Final = "COSTGUARD_EBS_SNAPSHOT_BEFORE_DELETE"
    EBS_SNAPSHOT_TTL: Final = "COSTGUARD_EBS_SNAPSHOT_TTL"
    BUDGET_THRESHOLDS: Final = "COSTGUARD_BUDGET_THRESHOLDS"
    ANOMALY_MIN_RATIO: Final = "COSTGUARD_ANOMALY_MIN_RATIO"
    ANOMALY_MIN_USD_PER_HOUR: Final = "COSTGUARD_ANOMALY_MIN_USD_PER_HOUR"
    ANOMALY_COOLDOWN_MINUTES: Final = "COSTGUARD_ANOMALY_COOLDOWN_MINUTES"
    DIGEST_HOUR_UTC: Final = "COSTGUARD_DIGEST_HOUR_UTC"
    SCAN_FAILED_ALERT_AFTER: Final = "COSTGUARD_SCAN_FAILED_ALERT_AFTER"
    ADVICE_ALERTS: Final = "COSTGUARD_ADVICE_ALERTS"
    ADVICE_MIN_MONTHLY_USD: Final = "COSTGUARD_ADVICE_MIN_MONTHLY_USD"
    COST_EXPLORER: Final = "COSTGUARD_COST_EXPLORER"
    PRICE_CHANGE_HOLD_PCT: Final = "COSTGUARD_PRICE_CHANGE_HOLD_PCT"
    PRICE_CATALOG_MAX_AGE_DAYS: Final = "COSTGUARD_PRICE_CATALOG_MAX_AGE_DAYS"
    IDLE_MINUTES: Final = "COSTGUARD_IDLE_MINUTES"
    IDLE_GPU_PCT: Final = "COSTGUARD_IDLE_GPU_PCT"
    IDLE_CPU_PCT: Final = "COSTGUARD_IDLE_CPU_PCT"
    IDLE_NETWORK_MB: Final = "COSTGUARD_IDLE_NETWORK_MB"
    IDLE_MAX_RUNTIME_HOURS: Final = "COSTGUARD_IDLE_MAX_RUNTIME_HOURS"
    IDLE_GRACE_MINUTES: Final = "COSTGUARD_IDLE_GRACE_MINUTES"
    IDLE_ALL_ACCELERATORS: Final = "COSTGUARD_IDLE_ALL_ACCELERATORS"
    IDLE_GPU_DISCOVERY: Final = "COSTGUARD_IDLE_GPU_DISCOVERY"
    S3_SWEEP_PREFIXES: Final = "COSTGUARD_S3_SWEEP_PREFIXES"
    S3_KEEP_PREFIX: Final = "COSTGUARD_S3_KEEP_PREFIX"
    S3_PURGE_NONCURRENT: Final = "COSTGUARD_S3_PURGE_NONCURRENT"
    S3_BREAKER_PCT: Final = "COSTGUARD_S3_BREAKER_PCT"
    S3_BREAKER_MAX_GIB: Final = "COSTGUARD_S3_BREAKER_MAX_GIB"
    S3_BACKSTOP: Final = "COSTGUARD_S3_BACKSTOP"
    #: Organization hub (set only on the hub's fan-out and consumer Lambdas).
    ORG_ACCOUNTS: Final = "COSTGUARD_ORG_ACCOUNTS"
    ORG_ID: Final = "COSTGUARD_ORG_ID"
    MEMBER_ROLE: Final = "COSTGUARD_MEMBER_ROLE"
    PER_ACCOUNT_CONCURRENCY: Final = "COSTGUARD_PER_ACCOUNT_CONCURRENCY"
    PROBE_HOURS: Final = "COSTGUARD_PROBE_HOURS"
    SLICE_DEADLINE_MINUTES: Final = "COSTGUARD_SLICE_DEADLINE_MINUTES"
    ORG_OPT_OUT_TAG: Final = "COSTGUARD_ORG_OPT_OUT_TAG"
    ORG_REGIONS: Final = "COSTGUARD_ORG_REGIONS"
    #: The hub's FIFO work queue (the fan-out's only).
    QUEUE_URL: Final = "COSTGUARD_QUEUE_URL"
    #: The Organization hub's guard queue (one guard in one member account per message).
    ACT_QUEUE_URL: Final = "COSTGUARD_ACT_QUEUE_URL"
    SLACK_SECRET_NAME: Final = "COSTGUARD_SLACK_SECRET_NAME"  # noqa: S105 - a variable name
    METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
    SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"


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
    FORECAST: Final = "forecast_month_usd"
    RUN_RATE: Final = "run_rate_usd_per_hour"
    STATUS: Final = "status"
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
    REFRESH_SERVICE: Final = "costguard-price-refresh"
    #: The Organization hub's Lambdas (Powertools' service name).
    ORG_FANOUT_SERVICE: Final = "costguard-org-fanout"
    ORG_CONSUMER_SERVICE: Final = "costguard-org-consumer"
    ORG_ACT_SERVICE: Final = "costguard-org-act"


class Heartbeat:
    """The metrics CostGuard's notebook lifecycle configuration publishes every 5 minutes.

    The contract between the script that runs on a SageMaker notebook instance and the
    idle-notebook guard that reads it. No datapoint means "unknown", never idle.
    """

    NAMESPACE: Final = "CostGuard/Notebook"
    DIMENSION: Final = "NotebookInstanceName"
    #: 1 when a kernel was busy, or a kernel or terminal saw activity, in the last
    #: 5 minutes; 0 otherwise.
    JUPYTER_ACTIVITY: Final = "JupyterActivity"
    #: The busiest GPU's utilization in percent (absent on an instance without a GPU).
    GPU_UTILIZATION: Final = "GPUUtilization"
    PERIOD_SECONDS: Final = 300


class AgentGpu:
    """The CloudWatch agent's NVIDIA GPU metric the idle guard reads on EC2 notebooks.

    The agent adds ``index``, ``name`` and ``host``; ``InstanceId`` only when its
    ``append_dimensions`` asks for it, which the guard needs to find an instance's series.
    """

    NAMESPACE: Final = "CWAgent"
    UTILIZATION: Final = "nvidia_smi_utilization_gpu"
    INSTANCE: Final = "InstanceId"
    INDEX: Final = "index"


class OrgRoles:
    """The roles of an Organization deployment: the hub's, and each member account's.

    Fixed names, so that the member stack (a StackSet, deployed before or after the hub)
    can name the hub's roles in its trust policy, and the hub can name the member roles it
    assumes in every account without a lookup.
    """

    #: The hub's scan consumers (and ``costguard scan --accounts`` users) assume this in members.
    MEMBER_READ: Final = "costguard-member-read"
    #: The hub's guards assume this in members: tag-conditioned mutations only.
    MEMBER_ACT: Final = "costguard-member-act"
    #: The hub's roles that may assume them (in the hub account).
    HUB_SCAN: Final = "costguard-hub-scan"
    HUB_ACT: Final = "costguard-hub-act"
    #: Whom each member role trusts: narrow on both sides, so that neither side alone
    #: (the hub role's own policy, the member role's trust) keeps a hub role out of a
    #: member role it has no business in. The scan consumer reads (its scans, probes and
    #: region reads); only the act consumer, which enters no account through the read
    #: role, acts. The fan-out assumes nothing.
    READ_TRUSTS: Final = (HUB_SCAN,)
    ACT_TRUSTS: Final = (HUB_ACT,)
