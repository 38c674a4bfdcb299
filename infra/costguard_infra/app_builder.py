"""Build the CDK app: configuration from context, the stack, and cdk-nag on every synth."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from costguard_infra.config import CONTEXT_KEYS, ConfigError, CostGuardConfig
from costguard_infra.hub import hub_acknowledgements
from costguard_infra.launch_events import LaunchForwardingStack, forwarded_regions
from costguard_infra.stack import CostGuardStack

#: Every cdk-nag finding CostGuard accepts, and why. Anything else fails the synth.
#: An acknowledgement applies stack-wide, so one that matches no finding today would
#: silently approve a future one: tests/infra/test_nag.py proves each is needed.
ACKNOWLEDGEMENTS: dict[str, str] = {
    "AwsSolutions-IAM5[Resource::*]": (
        "EC2 Describe*, EKS ListClusters, SageMaker List*, tag:GetResources, "
        "X-Ray PutTraceSegments, DescribeSpotPriceHistory, pricing:GetProducts (price-refresh "
        "role only) and cloudtrail:LookupEvents (roles that run the stale-volume guard, "
        "and the on-launch Lambda) support no resource-level permissions; every such "
        "statement is read-only (asserted by tests/infra)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:eks:*:<AWS::AccountId>:cluster/*]": (
        "CostGuard scans every EKS cluster of the account in the configured regions, and the "
        "on-launch Lambda reads a launched node's cluster (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:eks:*:<AWS::AccountId>:nodegroup/*]": (
        "CostGuard reads every node group of the account in the configured regions, and the "
        "on-launch Lambda a launched node's node group (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:*]": (
        "CostGuard reads every SageMaker endpoint, training job and tag of the account, and "
        "the on-launch Lambda the one notebook, endpoint or training job launched (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:<AWS::AccountId>:instance/*]": (
        "the guards may stop, and write only a warning tag (costguard:action-after, "
        "costguard:stop-after) on, any instance of the account that carries "
        "costguard:project and is not permanently exempt (aws:ResourceTag and aws:TagKeys "
        "conditions, asserted by tests/infra)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:notebook-instance/*]": (
        "the idle-notebook and max-lifetime guards may stop, and write only their warning tag "
        "(costguard:action-after, costguard:stop-after) on, any notebook instance of the "
        "account that carries costguard:project and is not permanently exempt "
        "(aws:ResourceTag and aws:TagKeys conditions, asserted by tests)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:training-job/*]": (
        "the max-lifetime guard may stop (never delete), and tag only with costguard:stop-after, "
        "any training job of the account that carries costguard:project and is not "
        "permanently exempt (aws:ResourceTag and aws:TagKeys conditions, asserted by tests)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:app/*]": (
        "the idle-notebook guard may delete (never the space or its storage), and tag only "
        "with costguard:action-after, any Studio app of the account that carries "
        "costguard:project and is not permanently exempt (aws:ResourceTag conditions)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:space/*]": (
        "the idle-notebook guard reads Studio spaces' idle-shutdown settings and tags (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:domain/*]": (
        "the idle-notebook guard reads Studio domains' idle-shutdown and tag-propagation "
        "settings (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:<AWS::AccountId>:volume/*]": (
        "the stale-volume guard may snapshot and delete, and write only the warning tag on, "
        "volumes of the account that carry costguard:project and are not permanently exempt "
        "(aws:ResourceTag conditions, asserted by tests/infra/test_stale_volumes_stack.py)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*::snapshot/*]": (
        "snapshot ARNs carry no account; the stale-volume guard may create a snapshot only "
        "with costguard:project, costguard:source-volume and costguard:ttl (aws:RequestTag), "
        "and delete only snapshots tagged costguard:ttl and costguard:project"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::*]": (
        "the stale-objects guard reads tags, Object Lock and lifecycle of the account's buckets "
        "(s3:ResourceAccount condition) and merges its backstop rule into opted-in ones; "
        "bucket tags cannot condition IAM unless each bucket's owner enables ABAC"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::*/*]": (
        "the stale-objects guard deletes (never a version) expired objects of opted-in buckets "
        "of this account only (s3:ResourceAccount); S3 supports no tag condition on deletes "
        "by default, so the opt-in is enforced in code and re-read during every sweep"
    ),
    "AwsSolutions-L1": (
        "Python 3.13 is pinned on purpose: it is the newest runtime for which CostGuard's "
        "bundled wheels and the public Powertools layer parameter are tested; bump both together"
    ),
    "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": (
        "publishing to the KMS-encrypted alert topic, and the price refresh writing its items "
        "of the encrypted ledger table, need GenerateDataKey* on CostGuard's own key (the "
        "statement's resource), which CDK's grant_publish adds"
    ),
    "AwsSolutions-SMG4": (
        "the Slack webhook URL (and, with answers, the Slack app's signing secret) is issued "
        "by Slack and cannot be rotated by a Lambda: rotate it in Slack and put the new value "
        "in the secret; the answer-link key is rotated by putting a new random value, which "
        "only makes the links sent before it (24 hours at most) unusable"
    ),
}


#: Needed for the single-account scan Lambda's role (its EKS and SageMaker reads) and the
#: on-launch Lambda's: an Organization hub has no scan role (its consumers read through the
#: member roles), so without launch alerts these match nothing there and are not applied.
SCAN_ONLY_ACKNOWLEDGEMENTS = frozenset(
    {
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:eks:*:<AWS::AccountId>:cluster/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:eks:*:<AWS::AccountId>:nodegroup/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:*]",
    }
)


#: Needed only for the single-account guard Lambdas' roles (their tag-conditioned
#: actions): an Organization hub has no guard Lambda (its act consumer acts through the
#: member act role, whose own stack acknowledges these), so they are not applied there.
GUARD_ONLY_ACKNOWLEDGEMENTS = frozenset(
    {
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:<AWS::AccountId>:instance/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:notebook-instance/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:training-job/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:app/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:space/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:domain/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:<AWS::AccountId>:volume/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*::snapshot/*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::*/*]",
    }
)


def acknowledgements_for(config: CostGuardConfig) -> dict[str, str]:
    """The acknowledgements of this deployment: exactly the findings it raises
    (tests/infra/test_nag.py and test_hub_stack.py prove it, in both modes)."""
    if not config.org_mode:
        return dict(ACKNOWLEDGEMENTS)
    # The hub's on-launch Lambda reads the launched node group, cluster or SageMaker
    # resource of its own account with the scan's resource patterns.
    dropped = (
        set() if config.launch_alerts else set(SCAN_ONLY_ACKNOWLEDGEMENTS)
    ) | GUARD_ONLY_ACKNOWLEDGEMENTS
    kept = {k: v for k, v in ACKNOWLEDGEMENTS.items() if k not in dropped}
    return {**kept, **hub_acknowledgements(config)}


#: Context keys that belong to CDK itself: feature flags and cached lookups are all
#: namespaced with ":" (``@aws-cdk/core:...``, ``availability-zones:account=...``),
#: which no CostGuard key is; these plain ones are CDK's too.
CDK_PLAIN_KEYS = frozenset({"account", "region", "acknowledged-issue-numbers"})


def check_context_keys(context: Mapping[str, Any]) -> None:
    """A mistyped CostGuard key (``-c scanrate=5 minutes``) is an error, not the default.

    Only a key that looks like one of CostGuard's is refused: the CDK CLI, its users and
    other tools pass context of their own (``cli-telemetry``, cached lookups, feature
    flags), which is none of CostGuard's business.
    """
    hints = []
    for key in sorted(context):
        if key in CONTEXT_KEYS or key in CDK_PLAIN_KEYS or ":" in key:
            continue
        same = [c for c in CONTEXT_KEYS if _fold(c) == _fold(key)]
        close = difflib.get_close_matches(key, CONTEXT_KEYS, n=1, cutoff=0.8)
        guesses = same or close
        if guesses:
            hints.append(f"`{key}` (did you mean `{guesses[0]}`?)")
    if hints:
        raise ConfigError("invalid CostGuard context: unknown key " + ", ".join(hints))


def _fold(key: str) -> str:
    return key.replace("_", "").replace("-", "").lower()


def build_app(
    context: dict[str, Any] | None = None,
    outdir: str | None = None,
    *,
    acknowledgements: Mapping[str, str] | None = None,
) -> tuple[cdk.App, CostGuardStack]:
    """The app with cdk-nag; ``acknowledgements`` (default: :func:`acknowledgements_for`
    the configuration) is for the test that proves each is needed."""
    app = cdk.App(context=context or {}, outdir=outdir)
    check_context_keys(app.node.get_all_context())
    raw = {key: app.node.try_get_context(key) for key in CONTEXT_KEYS}
    config = CostGuardConfig.from_context({k: v for k, v in raw.items() if v is not None})
    stack = CostGuardStack(
        app,
        "CostGuard",
        config=config,
        env=cdk.Environment(
            account=app.node.try_get_context("account") or None,
            region=app.node.try_get_context("region") or None,
        ),
    )
    cdk.Tags.of(stack).add("costguard:component", "costguard")
    # Launch events of the other scanned regions: EventBridge rules are regional, so each
    # region forwards to the home region's bus. Only when the home region is known
    # (``-c region=…``); an environment-agnostic synth deploys the home region's rules
    # alone (docs/deploy.md). In an Organization, the member accounts' launch-events
    # stack forwards instead (member.py), the hub account's included.
    if config.launch_alerts and not config.org_mode:
        for region in forwarded_regions(stack.region, config.regions):
            forwarding = LaunchForwardingStack(
                app,
                f"CostGuardLaunchEvents-{region}",
                home_region=stack.region,
                env=cdk.Environment(
                    account=app.node.try_get_context("account") or None, region=region
                ),
            )
            cdk.Tags.of(forwarding).add("costguard:component", "costguard")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    if acknowledgements is None:
        acknowledgements = acknowledgements_for(config)
    for rule, reason in acknowledgements.items():
        cdk.Validations.of(stack).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))
    return app, stack
