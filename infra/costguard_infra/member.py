"""The member-account stack: the two roles the hub assumes in every guarded account.

Deployed to an organizational unit as a CloudFormation StackSet (service-managed,
automatic deployment), so it holds no Lambda, no asset and no bootstrap check: the
template is self-contained and a new account of the OU gets it on joining.

- ``costguard-member-read``: what the scan reads (``costguard.iam.scan_permissions``) and
  the account's opted-in regions (``ec2:DescribeRegions``, ``costguard.iam.ORG_MEMBER_EXTRA``),
  nothing that changes anything.
- ``costguard-member-act``: what the guards may do (``costguard.guards``), every
  mutating statement tag-conditioned exactly as in the single-account stack.

Each trusts only the hub role that needs it (``OrgRoles.READ_TRUSTS``: the scan consumer;
``OrgRoles.ACT_TRUSTS``: the act consumer), by ARN, and only from inside the Organization:
the trust is narrow on the member's side too, so the scan consumer (which parses
untrusted tags from every account) cannot enter the act role even if its own policy
came to allow it. The principal is the hub *account*, narrowed by ``aws:PrincipalArn``,
rather than the role ARNs themselves: IAM refuses a trust policy naming a role that does not exist
yet (so the StackSet could not be rolled out before the hub), and silently breaks it
when the hub's role is re-created (the stored principal is the old role's unique id).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks
from constructs import Construct
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from costguard.adapters.launched import READS as LAUNCH_READS
from costguard.config_spec import REGION, valid_role_name
from costguard.domain.org_roles import OrgRoles
from costguard.guards import actuator_permissions
from costguard.iam import member_read_permissions
from costguard_infra.config import ConfigError
from costguard_infra.guard_function import policy_statements
from costguard_infra.launch_events import LaunchForwarder

#: Context keys of the member app (``-c hubAccount=111111111111 -c orgId=o-abc123``).
MEMBER_CONTEXT_KEYS = (
    "hubAccount",
    "orgId",
    "orgMemberRole",
    "sagemakerTags",
    "sagemakerStudio",
    "hubRegion",
)

#: cdk-nag findings the member stack accepts, and why (tests/infra/test_member_stack.py
#: proves each one is needed: an unneeded acknowledgement would approve a future finding).
MEMBER_ACKNOWLEDGEMENTS: dict[str, str] = {
    "AwsSolutions-IAM5[Resource::*]": (
        "EC2 Describe* (DescribeRegions included), EKS ListClusters, SageMaker List*, "
        "tag:GetResources, CloudWatch GetMetricData and DescribeSpotPriceHistory support no "
        "resource-level permissions; "
        "every such statement is read-only (asserted by tests/infra/test_member_stack.py)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:eks:*:<AWS::AccountId>:cluster/*]": (
        "the hub scans every EKS cluster of the member account (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:eks:*:<AWS::AccountId>:nodegroup/*]": (
        "the hub reads every node group of the member account (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:*]": (
        "the hub reads every SageMaker endpoint, training job and tag of the account (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:<AWS::AccountId>:instance/*]": (
        "the actuator role may stop, and write only the costguard:action-after or "
        "costguard:stop-after warning tag on, instances that carry costguard:project and are "
        "not permanently exempt"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:notebook-instance/*]": (
        "the actuator role may stop, and tag only with costguard:action-after or "
        "costguard:stop-after, notebook instances that carry costguard:project and are not "
        "permanently exempt"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:training-job/*]": (
        "the actuator role may stop (never delete), and tag only with costguard:stop-after, "
        "training jobs that carry costguard:project and are not permanently exempt"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:app/*]": (
        "the actuator role may delete, and tag only with costguard:action-after, Studio apps "
        "that carry costguard:project and are not permanently exempt"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:space/*]": (
        "the idle-notebook guard reads Studio spaces' settings and tags (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:*:<AWS::AccountId>:domain/*]": (
        "the idle-notebook guard reads Studio domains' settings (read-only)"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*:<AWS::AccountId>:volume/*]": (
        "the stale-volume guard may snapshot and delete, and tag only with the warning tag, "
        "volumes that carry costguard:project and are not permanently exempt"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:*::snapshot/*]": (
        "snapshot ARNs carry no account; snapshots are created only with costguard:project "
        "(aws:RequestTag) and deleted only when tagged costguard:ttl and costguard:project"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::*]": (
        "the stale-objects guard reads tags, Object Lock and lifecycle of the member account's "
        "buckets only (s3:ResourceAccount) and merges its backstop rule into opted-in ones"
    ),
    "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::*/*]": (
        "the stale-objects guard deletes expired objects of opted-in buckets of the member "
        "account only (s3:ResourceAccount); S3 supports no tag condition on deletes"
    ),
}


class MemberConfig(BaseModel):
    """The member stack's context: the hub account and the Organization it trusts."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    hub_account: str
    org_id: str
    #: The read role's name: the hub's ``orgMemberRole`` (the same ``-c`` value on both).
    member_role: str = OrgRoles.MEMBER_READ
    sagemaker_tags: str = "tagging-api"
    sagemaker_studio: bool = True
    #: The hub's region (its default bus): set, the app also builds the launch-events
    #: stack, which forwards this account's accelerator launches to the hub.
    hub_region: str | None = None

    @field_validator("hub_account", mode="before")
    @classmethod
    def _account(cls, value: Any) -> str:
        text = str(value).strip()
        if not re.fullmatch(r"[0-9]{12}", text):
            raise ValueError(f"hubAccount must be a 12-digit account id, not {value!r}")
        return text

    @field_validator("org_id", mode="before")
    @classmethod
    def _org(cls, value: Any) -> str:
        text = str(value).strip()
        if not re.fullmatch(r"o-[a-z0-9]{10,32}", text):
            raise ValueError(f"orgId must look like o-abc1234567 (10-32 characters), not {value!r}")
        return text

    @field_validator("member_role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> str:
        text = str(value).strip()
        try:
            valid_role_name(text)
        except ValueError as exc:
            raise ValueError(f"orgMemberRole {exc}") from None
        if text.casefold() == OrgRoles.MEMBER_ACT.casefold():
            # IAM role names are unique regardless of case: the two roles would collide.
            raise ValueError(
                f"orgMemberRole must not be {OrgRoles.MEMBER_ACT}, the act role's name, "
                f"got {value!r}"
            )
        return text

    @field_validator("hub_region", mode="before")
    @classmethod
    def _region(cls, value: Any) -> str | None:
        text = str(value).strip()
        if not text:
            return None
        if not REGION.fullmatch(text):
            raise ValueError(f"hubRegion must be a region like us-east-1, not {value!r}")
        return text

    @field_validator("sagemaker_tags", mode="before")
    @classmethod
    def _tags(cls, value: Any) -> str:
        if value not in ("tagging-api", "per-resource"):
            raise ValueError(f"sagemakerTags must be tagging-api or per-resource, not {value!r}")
        return str(value)

    @field_validator("sagemaker_studio", mode="before")
    @classmethod
    def _studio(cls, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ValueError(f"sagemakerStudio must be true or false, not {value!r}")

    @classmethod
    def from_context(cls, context: Mapping[str, Any]) -> MemberConfig:
        names = {
            "hubAccount": "hub_account",
            "orgId": "org_id",
            "orgMemberRole": "member_role",
            "sagemakerTags": "sagemaker_tags",
            "sagemakerStudio": "sagemaker_studio",
            "hubRegion": "hub_region",
        }
        keys = {field: key for key, field in names.items()}
        try:
            return cls(**{names[k]: v for k, v in context.items() if k in names})
        except ValidationError as exc:
            # Named by the -c key the user writes (`hubAccount`), not the field.
            problems = "; ".join(
                f"`{keys.get(str(e['loc'][0]), e['loc'][0])}` is required (-c key=value)"
                if e["type"] == "missing" and e["loc"]
                else f"{'.'.join(keys.get(str(p), str(p)) for p in e['loc']) or 'context'}: "
                f"{e['msg']}"
                for e in exc.errors()
            )
            raise ConfigError(f"invalid member-stack context: {problems}") from exc

    def hub_role_arns(self, partition: str, names: tuple[str, ...]) -> list[str]:
        """The ARNs of the hub's roles ``names`` (e.g. ``OrgRoles.READ_TRUSTS``)."""
        return [f"arn:{partition}:iam::{self.hub_account}:role/{name}" for name in names]


class HubTrustedRole(Construct):
    """A role only the hub's roles ``trusts`` may assume, from inside the Organization."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        role_name: str,
        description: str,
        config: MemberConfig,
        trusts: tuple[str, ...],
        permissions: tuple[Any, ...],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        principal = iam.AccountPrincipal(config.hub_account).with_conditions(
            {
                "ArnEquals": {"aws:PrincipalArn": config.hub_role_arns(stack.partition, trusts)},
                "StringEquals": {"aws:PrincipalOrgID": config.org_id},
            }
        )
        self.role = iam.Role(
            self,
            "Role",
            role_name=role_name,
            assumed_by=principal,
            description=description,
            max_session_duration=cdk.Duration.hours(1),
        )
        for statement in policy_statements(permissions, stack):
            self.role.add_to_policy(statement)


class CostGuardMemberStack(cdk.Stack):
    """The two roles, nothing else: no Lambda, no asset, no bootstrap version rule."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: MemberConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="CostGuard member account: roles the CostGuard hub assumes",
            # A StackSet instance runs in accounts nobody bootstrapped: no SSM lookup.
            synthesizer=cdk.BootstraplessSynthesizer(),
            **kwargs,
        )
        self.read = HubTrustedRole(
            self,
            "Read",
            role_name=config.member_role,
            description="CostGuard hub: read-only inventory of this account",
            config=config,
            trusts=OrgRoles.READ_TRUSTS,
            # The scan's permissions, plus ec2:DescribeRegions for the hub's region
            # discovery, plus what the hub's on-launch Lambda reads of one launched
            # resource (adapters.launched.READS: all read-only).
            permissions=(
                *member_read_permissions(
                    sagemaker_tags=config.sagemaker_tags, sagemaker_studio=config.sagemaker_studio
                ),
                *LAUNCH_READS,
            ),
        )
        self.act = HubTrustedRole(
            self,
            "Act",
            role_name=OrgRoles.MEMBER_ACT,
            description="CostGuard hub guards: tag-conditioned actions in this account",
            config=config,
            trusts=OrgRoles.ACT_TRUSTS,
            permissions=actuator_permissions(),
        )
        cdk.CfnOutput(self, "ReadRoleArn", value=self.read.role.role_arn)
        cdk.CfnOutput(self, "ActRoleArn", value=self.act.role.role_arn)


class CostGuardMemberLaunchEventsStack(cdk.Stack):
    """This account's accelerator launches in this region, forwarded to the hub's default
    bus (``hubRegion``), where the hub's on-launch Lambda judges them through the read role.

    A StackSet of its own, deployed to every scanned region of every member account (the
    roles stack cannot be: its role names are global). In the hub's own account and region
    it deploys nothing (a CloudFormation condition): the hub's own rules see those events,
    and forwarding them to the same bus would only repeat them.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: MemberConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description="CostGuard member account: forward accelerator launches to the hub",
            synthesizer=cdk.BootstraplessSynthesizer(),
            **kwargs,
        )
        if config.hub_region is None:
            raise ConfigError("the launch-events stack needs `hubRegion` (-c hubRegion=…)")
        self.forwarder = LaunchForwarder(
            self,
            "LaunchForwarding",
            account=config.hub_account,
            region=config.hub_region,
            what=f"the CostGuard hub's default bus ({config.hub_account}, {config.hub_region})",
        )
        self.not_the_hub = cdk.CfnCondition(
            self,
            "NotTheHubsOwnBus",
            expression=cdk.Fn.condition_not(
                cdk.Fn.condition_and(
                    cdk.Fn.condition_equals(cdk.Aws.ACCOUNT_ID, config.hub_account),
                    cdk.Fn.condition_equals(cdk.Aws.REGION, config.hub_region),
                )
            ),
        )
        for child in self.forwarder.node.find_all():
            if isinstance(child, cdk.CfnResource):
                child.cfn_options.condition = self.not_the_hub
        # A template needs a resource that is created: a no-op handle where nothing else is.
        cdk.CfnResource(self, "Placeholder", type="AWS::CloudFormation::WaitConditionHandle")


def build_member_app(
    context: Mapping[str, Any] | None = None,
    outdir: str | None = None,
    *,
    acknowledgements: Mapping[str, str] = MEMBER_ACKNOWLEDGEMENTS,
) -> tuple[cdk.App, CostGuardMemberStack]:
    """The member app with cdk-nag; ``acknowledgements`` is for the test that proves each."""
    app = cdk.App(context=dict(context or {}), outdir=outdir)
    raw = {key: app.node.try_get_context(key) for key in MEMBER_CONTEXT_KEYS}
    config = MemberConfig.from_context({k: v for k, v in raw.items() if v is not None})
    stack = CostGuardMemberStack(app, "CostGuardMember", config=config)
    cdk.Tags.of(stack).add("costguard:component", "costguard-member")
    if config.hub_region is not None:
        events_stack = CostGuardMemberLaunchEventsStack(
            app, "CostGuardMemberLaunchEvents", config=config
        )
        cdk.Tags.of(events_stack).add("costguard:component", "costguard-member")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    for rule, reason in acknowledgements.items():
        cdk.Validations.of(stack).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))
    return app, stack
