"""The IAM permissions each adapter needs, declared next to the code that needs them.

The CDK stack derives every Lambda's policy from these declarations, and a test
checks the result, so the policy can neither lag behind the code nor grow by hand.
Resource strings may use ``{partition}`` and ``{account}``; the stack fills them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Verbs that only read. Everything else counts as mutating in the policy tests.
READ_ONLY_PREFIXES = ("Describe", "List", "Get", "BatchGet", "Query", "Scan")


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
        ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeVolumes"),
        "list accelerator instances, their types and attached volumes; EC2 Describe* "
        "calls do not support resource-level permissions",
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
            "sagemaker:ListApps",
        ),
        "list SageMaker compute; List* calls have no resource-level permissions",
    ),
    Permission(
        (
            "sagemaker:DescribeEndpoint",
            "sagemaker:DescribeEndpointConfig",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:ListTags",
        ),
        "read endpoint variants, training-job instances and tags in this account",
        resources=("arn:{partition}:sagemaker:*:{account}:*",),
    ),
    Permission(
        ("tag:GetResources",),
        "read SageMaker tags in pages rather than one call per resource",
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
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
)
"""Granted on CostGuard's own ledger table only (TransactWriteItems needs UpdateItem)."""


#: The condition every mutating statement on a user's resource carries: the resource
#: is tagged with a project, and is not permanently exempt. Dated exemptions are
#: checked by the executor (IAM cannot compare a tag with the clock).
IN_SCOPE_NOT_EXEMPT: Mapping[str, Mapping[str, Any]] = {
    "Null": {"aws:ResourceTag/costguard:project": "false"},
    "StringNotEqualsIgnoreCase": {"aws:ResourceTag/costguard:exempt": ["true", "yes"]},
}
#: Tagging statements may write or remove CostGuard's warning tag and no other.
ONLY_THE_WARNING_TAG: Mapping[str, Mapping[str, Any]] = {
    "Null": {"aws:ResourceTag/costguard:project": "false"},
    "ForAllValues:StringEquals": {"aws:TagKeys": ["costguard:action-after"]},
}


def scan_permissions(*, cost_explorer: bool = False) -> tuple[Permission, ...]:
    base = (*EC2_INVENTORY, *EC2_SPOT_PRICES, *EKS_INVENTORY, *SAGEMAKER_INVENTORY)
    return (*base, *COST_EXPLORER) if cost_explorer else base


def all_actions(permissions: Iterable[Permission]) -> set[str]:
    return {a for p in permissions for a in p.actions}
