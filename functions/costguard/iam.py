"""The IAM permissions each adapter needs, declared next to the code that needs them.

The CDK stack derives every Lambda's policy from these declarations, and a test
checks the result, so the policy can neither lag behind the code nor grow by hand.
Resource strings may use ``{partition}`` and ``{account}``; the stack fills them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from costguard.domain.org_roles import OrgRoles
from costguard.domain.tags import Tags

#: Verbs that only read. Everything else counts as mutating in the policy tests.
READ_ONLY_PREFIXES = ("Describe", "List", "Get", "BatchGet", "Query", "Scan", "Lookup")


@dataclass(frozen=True, slots=True)
class Permission:
    actions: tuple[str, ...]
    why: str
    resources: tuple[str, ...] = ("*",)
    conditions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def mutating(self) -> bool:
        return any(not a.split(":", 1)[1].startswith(READ_ONLY_PREFIXES) for a in self.actions)


EC2_INVENTORY = (
    Permission(
        (
            "ec2:DescribeInstances",
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeVolumes",
            "ec2:DescribeSnapshots",
        ),
        "list accelerator instances, their types and attached volumes, and the volumes and "
        "snapshots tagged with a project (storage); EC2 Describe* calls do not support "
        "resource-level permissions",
    ),
)
EC2_SPOT_PRICES = (
    Permission(("ec2:DescribeSpotPriceHistory",), "price spot instances at the current spot price"),
)
EKS_INVENTORY = (
    Permission(
        ("eks:ListClusters",),
        "list clusters; ListClusters has no resource-level permissions",
    ),
    Permission(
        ("eks:DescribeCluster", "eks:ListNodegroups", "eks:DescribeNodegroup"),
        "read cluster versions and node-group scaling and tags in this account",
        resources=(
            "arn:{partition}:eks:*:{account}:cluster/*",
            "arn:{partition}:eks:*:{account}:nodegroup/*",
        ),
    ),
)
SAGEMAKER_INVENTORY = (
    Permission(
        (
            "sagemaker:ListNotebookInstances",
            "sagemaker:ListEndpoints",
            "sagemaker:ListTrainingJobs",
        ),
        "list SageMaker compute; List* calls have no resource-level permissions",
    ),
    Permission(
        (
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeTrainingJob",
        ),
        "read endpoint variants and training-job instances in this account",
        resources=("arn:{partition}:sagemaker:*:{account}:*",),
    ),
)
SAGEMAKER_STUDIO = (
    Permission(
        ("sagemaker:ListApps",),
        "list running Studio apps (when Studio is scanned); ListApps has no resource-level "
        "permissions",
    ),
)
SAGEMAKER_TAGS_TAGGING_API = (
    Permission(
        ("tag:GetResources",),
        "read SageMaker tags in pages rather than one call per resource",
    ),
)
SAGEMAKER_TAGS_PER_RESOURCE = (
    Permission(
        ("sagemaker:ListTags",),
        "read SageMaker tags one resource at a time (where the tagging API is unavailable)",
        resources=("arn:{partition}:sagemaker:*:{account}:*",),
    ),
)
ENDPOINT_METRICS = (
    Permission(
        ("cloudwatch:GetMetricData",),
        "read SageMaker endpoints' GPU utilization and invocations in batches (up to 500 a "
        "call), for the oversized-endpoint advice and the cost per prediction; CloudWatch "
        "metric reads have no resource-level permissions",
    ),
)
S3_STORAGE = (
    Permission(
        ("s3:ListAllMyBuckets",),
        "list the buckets of each scanned region, once a day, to price project-tagged "
        "buckets' storage; ListBuckets has no resource-level permissions",
    ),
    Permission(
        ("tag:GetResources", "cloudwatch:ListMetrics", "cloudwatch:GetMetricData"),
        "once a day: tagged buckets' tags (pages of 100) and their BucketSizeBytes per "
        "storage class (batches of up to 500); these reads have no resource-level permissions",
    ),
)
COST_EXPLORER = (
    Permission(
        ("ce:GetCostAndUsage", "ce:GetAnomalies"),
        "reconcile month-to-date and forward AWS cost anomalies (opt-in; Cost Explorer "
        "has no resource-level permissions)",
    ),
)
LEDGER_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:BatchWriteItem",
)
"""What ``adapters.dynamodb.DynamoDbLedger`` calls for the scan, granted on CostGuard's
ledger table only.

``TransactWriteItems`` is authorized per item (its ``Update`` items need ``UpdateItem``).
tests/infra/test_permissions.py reads the adapter's calls and fails if this list and the
executor's (:data:`EXECUTOR_LEDGER_ACTIONS`) together disagree with the code in either
direction.
"""


PRICE_LIST = (
    Permission(
        ("pricing:GetProducts",),
        "read public list prices for the price catalog (price-refresh Lambda only); the "
        "Price List API has no resource-level permissions",
    ),
)
#: What ``adapters.catalog_store.DynamoDbCatalogStore`` calls (``TransactWriteItems`` of
#: two ``Put`` items is authorized as PutItem; ``Query`` finds the highest stored version),
#: granted to the price-refresh role on the ledger table's ``CATALOG`` items only
#: (``dynamodb:LeadingKeys``).
CATALOG_STORE_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query")
CATALOG_PARTITION = "CATALOG"


def refresh_permissions() -> tuple[Permission, ...]:
    """The price-refresh Lambda's permissions beyond its ledger items: the Price List API."""
    return PRICE_LIST


#: The condition every mutating statement on a user's resource carries: the resource
#: is tagged with a project, and is not permanently exempt. Dated exemptions are
#: checked by the executor (IAM cannot compare a tag with the clock).
IN_SCOPE_NOT_EXEMPT: Mapping[str, Mapping[str, Any]] = {
    "Null": {"aws:ResourceTag/costguard:project": "false"},
    "StringNotEqualsIgnoreCase": {"aws:ResourceTag/costguard:exempt": ["true", "yes"]},
}
#: CostGuard's warning tags: the one every guard shares, and the maximum lifetime's own
#: (two guards warning about one notebook must not withdraw each other's warning).
WARNING_TAGS = ("costguard:action-after", "costguard:stop-after")


def only_the_warning_tag(tag: str = WARNING_TAGS[0]) -> Mapping[str, Mapping[str, Any]]:
    """Tagging statements may write or remove this warning tag and no other.

    ``ForAllValues`` holds vacuously over a request that names no key, and EC2's
    DeleteTags without ``Tags`` deletes every tag: so the keys must be named (``Null``
    false) too."""
    return {
        "Null": {"aws:ResourceTag/costguard:project": "false", "aws:TagKeys": "false"},
        "ForAllValues:StringEquals": {"aws:TagKeys": [tag]},
    }


def remove_only_the_warning_tag(tag: str = WARNING_TAGS[0]) -> Mapping[str, Mapping[str, Any]]:
    """Removing CostGuard's own warning tag is harmless wherever it is, and must work after
    the project tag was removed (the warning is then withdrawn)."""
    return {
        "Null": {"aws:TagKeys": "false"},
        "ForAllValues:StringEquals": {"aws:TagKeys": [tag]},
    }


ONLY_THE_WARNING_TAG: Mapping[str, Mapping[str, Any]] = only_the_warning_tag()
REMOVE_ONLY_THE_WARNING_TAG: Mapping[str, Mapping[str, Any]] = remove_only_the_warning_tag()


def warning_tag_permissions(
    service: str,
    noun: str,
    resources: tuple[str, ...],
    *,
    tag_verb: str = "CreateTags",
    tag: str = WARNING_TAGS[0],
) -> tuple[Permission, Permission]:
    """Write and remove the warning tag ``tag``, and no other tag, on ``noun``.

    Writing needs the project tag on the resource; removing works on any, so that a
    warning can be withdrawn after the project tag was removed. Every actuator that warns
    declares this pair (``ec2``: CreateTags/DeleteTags, ``sagemaker``: AddTags/DeleteTags).
    """
    return (
        Permission(
            (f"{service}:{tag_verb}",),
            f"write the {tag} warning tag, and no other tag, on {noun} tagged with a project",
            resources=resources,
            conditions=only_the_warning_tag(tag),
        ),
        Permission(
            (f"{service}:DeleteTags",),
            f"remove the {tag} warning tag, and no other tag, from any of "
            f"the {noun}: a warning must be withdrawable after the project tag is removed",
            resources=resources,
            conditions=remove_only_the_warning_tag(tag),
        ),
    )


def with_warning_tag(permissions: Iterable[Permission], tag: str) -> tuple[Permission, ...]:
    """An actuator's permissions for a guard that warns with ``tag``: its tagging
    statements name that tag instead of the shared one; everything else is unchanged."""
    out = []
    for p in permissions:
        conditions = dict(p.conditions)
        if conditions == dict(ONLY_THE_WARNING_TAG):
            conditions = dict(only_the_warning_tag(tag))
        elif conditions == dict(REMOVE_ONLY_THE_WARNING_TAG):
            conditions = dict(remove_only_the_warning_tag(tag))
        else:
            out.append(p)
            continue
        out.append(
            Permission(p.actions, p.why.replace(WARNING_TAGS[0], tag), p.resources, conditions)
        )
    return tuple(out)


def exempt_tag_permissions(permissions: Iterable[Permission]) -> tuple[Permission, ...]:
    """What a guard's role adds to take answers: write ``costguard:exempt``, and no other tag,
    wherever its actuators may write their warning tag (same actions, same resources, the
    project tag required on the resource). Keep and exempt are written this way
    (``actuator.mark``); nothing is removed, so no DeleteTags is added."""
    out: list[Permission] = []
    for p in permissions:
        if any(dict(p.conditions) == dict(only_the_warning_tag(t)) for t in WARNING_TAGS):
            answer = Permission(
                p.actions,
                f"write the {Tags.EXEMPT} tag, and no other tag, on what the guard warns "
                "(an owner's keep or exempt answer), tagged with a project",
                p.resources,
                only_the_warning_tag(Tags.EXEMPT),
            )
            if answer not in out:
                out.append(answer)
    return tuple(out)


#: What the executor's ledger calls need (claims, their status, warnings, the audit trail):
#: the actuator role gets these on the ledger table, not the scan's wider set. A run reads
#: the records of the warnings it finds at once (BatchGetItem) and writes its audit
#: records together (BatchWriteItem).
EXECUTOR_LEDGER_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:BatchWriteItem",
)
#: What the on-launch check's ledger calls need (``services.launch`` through the alert
#: service): the project figures' state and the catalog (GetItem), the alert claims
#: (``claim``/``confirm``/``release``: UpdateItem) and the alert log (``record_alert``:
#: PutItem). Nothing is queried, batched or scanned for one launch.
LAUNCH_LEDGER_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
#: What a guard that records findings (a malformed tag, an unreadable region) adds: the
#: ledger keeps a day's findings once each (a query of the day's, then a batch write).
FINDINGS_LEDGER_ACTIONS = ("dynamodb:Query", "dynamodb:BatchWriteItem")


#: A resource being created has no tags yet: it qualifies by the project tag it must be
#: created *with* (tag-on-create, e.g. CostGuard's backup snapshot).
CREATED_WITH_A_PROJECT = "aws:RequestTag/costguard:project"

#: S3 buckets of the deploying account only. S3's deletes and bucket configuration cannot
#: be tag-conditioned on a general purpose bucket unless its owner enabled ABAC (off by
#: default), and s3:ExistingObjectTag is not supported for deletes: this is as tight as
#: AWS allows for them, and the stale-objects guard re-checks the opt-in in code.
THIS_ACCOUNT_ONLY: Mapping[str, Mapping[str, Any]] = {
    "StringEquals": {"s3:ResourceAccount": "${aws:PrincipalAccount}"}
}
#: The only mutations allowed with THIS_ACCOUNT_ONLY instead of a tag condition.
S3_UNTAGGABLE_MUTATIONS = frozenset({"s3:DeleteObject", "s3:PutLifecycleConfiguration"})


def account_scoped_s3(actions: Iterable[str], conditions: Mapping[str, Any]) -> bool:
    """An S3 mutation that AWS cannot tag-condition, limited to this account's buckets."""
    return set(actions) <= S3_UNTAGGABLE_MUTATIONS and dict(conditions) == dict(THIS_ACCOUNT_ONLY)


def tag_conditioned(conditions: Mapping[str, Mapping[str, Any]]) -> bool:
    """A mutating statement is tag-conditioned when it depends on the resource's tags, when
    it may only create a resource carrying a project tag, or when all it can do is remove
    CostGuard's own warning tag."""
    keys = {k for tests in conditions.values() for k in tests}
    created_with_project = conditions.get("Null", {}).get(CREATED_WITH_A_PROJECT) == "false"
    return (
        any("ResourceTag/" in k for k in keys)
        or created_with_project
        or any(dict(conditions) == dict(remove_only_the_warning_tag(t)) for t in WARNING_TAGS)
    )


def scan_permissions(
    *,
    cost_explorer: bool = False,
    sagemaker_tags: str = "tagging-api",
    sagemaker_studio: bool = True,
) -> tuple[Permission, ...]:
    """The scan Lambda's permissions for the configuration the stack deploys it with."""
    tags = (
        SAGEMAKER_TAGS_TAGGING_API
        if sagemaker_tags == "tagging-api"
        else SAGEMAKER_TAGS_PER_RESOURCE
    )
    return (
        *EC2_INVENTORY,
        *EC2_SPOT_PRICES,
        *EKS_INVENTORY,
        *SAGEMAKER_INVENTORY,
        *tags,
        *(SAGEMAKER_STUDIO if sagemaker_studio else ()),
        *ENDPOINT_METRICS,
        *S3_STORAGE,
        *(COST_EXPLORER if cost_explorer else ()),
    )


# -- Organization mode: the hub's own grants -------------------------------------------------


def org_discovery_permissions(org_id: str) -> tuple[Permission, ...]:
    """The hub's fan-out with ``orgAccounts=discover``: the actions of :data:`ORG_DISCOVERY`
    (what ``adapters/organizations.py`` calls), ``ListTagsForResource`` narrowed to the
    Organization's accounts. Run from the management account or a delegated administrator."""
    return (
        Permission(
            ("organizations:ListAccounts",),
            "list the Organization's accounts; ListAccounts has no resource-level permissions",
        ),
        Permission(
            ("organizations:ListTagsForResource",),
            "read the opt-out tag of the Organization's member accounts (their ARNs name the "
            "management account, which the hub may not be: hence `*` before the org id)",
            resources=(f"arn:{{partition}}:organizations::*:account/{org_id}/*",),
        ),
    )


def _assume_in_org(role: str, org_id: str, what: str) -> tuple[Permission, ...]:
    return (
        Permission(
            ("sts:AssumeRole",),
            f"{what}, and only inside the Organization (aws:ResourceOrgID): never a role of "
            "the same name elsewhere",
            resources=(f"arn:{{partition}}:iam::*:role/{role}",),
            conditions={"StringEquals": {"aws:ResourceOrgID": org_id}},
        ),
    )


def hub_assume_permissions(member_role: str, org_id: str) -> tuple[Permission, ...]:
    """The hub's scan consumers: the member read role, in the Organization's accounts only."""
    return _assume_in_org(member_role, org_id, "scan each member account through its read role")


def hub_act_permissions(org_id: str) -> tuple[Permission, ...]:
    """The hub's guard consumers: the member act role (fixed name), in the Organization's
    accounts only. What they may do there is the act role's own, tag-conditioned policy."""
    what = "act in each member account through its tag-conditioned act role"
    return _assume_in_org(OrgRoles.MEMBER_ACT, org_id, what)


def org_scoped_assume(actions: Iterable[str], conditions: Mapping[str, Any]) -> bool:
    """The one mutating-looking grant on foreign resources that is no tag condition: the
    hub's AssumeRole into member roles, limited to the Organization's accounts."""
    org = dict(conditions).get("StringEquals", {}).get("aws:ResourceOrgID")
    return set(actions) == {"sts:AssumeRole"} and isinstance(org, str) and org.startswith("o-")


def all_actions(permissions: Iterable[Permission]) -> set[str]:
    return {a for p in permissions for a in p.actions}


# -- organization mode -----------------------------------------------------------------------

#: What the member-read role needs beyond the scan's permissions: the hub's ``regions``
#: work item reads the account's opted-in regions (adapters/member.py). The probe calls
#: only what the scan already holds (ec2:DescribeInstances/DescribeInstanceTypes, eks:ListClusters,
#: sagemaker:ListNotebookInstances/ListEndpoints/ListTrainingJobs, and sagemaker:ListApps
#: when Studio is scanned): see :data:`PROBE_ACTIONS`.
ORG_MEMBER_EXTRA = (
    Permission(
        ("ec2:DescribeRegions",),
        "read the account's opted-in regions for the hub's region discovery; "
        "DescribeRegions has no resource-level permissions",
    ),
)
#: The probe's calls (adapters/member.py), each one already a scan permission.
PROBE_ACTIONS = (
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypes",
    "eks:ListClusters",
    "sagemaker:ListNotebookInstances",
    "sagemaker:ListEndpoints",
    "sagemaker:ListTrainingJobs",
)
#: Only when SageMaker Studio is scanned.
PROBE_STUDIO_ACTIONS = ("sagemaker:ListApps",)
#: The fan-out's account discovery (adapters/organizations.py), only with orgAccounts=discover,
#: from the management account or a delegated administrator. Neither action supports
#: resource-level permissions narrower than the Organization's accounts.
ORG_DISCOVERY = (
    Permission(
        ("organizations:ListAccounts", "organizations:ListTagsForResource"),
        "list the Organization's accounts and read each one's costguard:opt-out tag",
    ),
)


def member_read_permissions(
    *, sagemaker_tags: str = "tagging-api", sagemaker_studio: bool = True
) -> tuple[Permission, ...]:
    """The member-read role: the scan's permissions plus :data:`ORG_MEMBER_EXTRA`, and
    ``sagemaker:ListTags`` whatever ``sagemakerTags`` says: the hub's on-launch check reads
    the one resource's tags from the resource, not the tagging API's lagging index."""
    return (
        *scan_permissions(sagemaker_tags=sagemaker_tags, sagemaker_studio=sagemaker_studio),
        *ORG_MEMBER_EXTRA,
        *(SAGEMAKER_TAGS_PER_RESOURCE if sagemaker_tags == "tagging-api" else ()),
    )
