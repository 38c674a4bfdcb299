"""Launch events: the EventBridge rules that hand an accelerator launch to the on-launch
Lambda within a minute, and the forwarding that brings other regions' and member
accounts' launches to it.

- **Patterns** (:func:`launch_patterns`), from the handler's own constants
  (:mod:`costguard.domain.launch`): EC2 state changes to ``pending``/``running`` (the
  event carries no instance type, so every instance matches and the Lambda drops the
  non-accelerated ones after one ``DescribeInstances``); SageMaker notebook instances
  ``InService``, endpoints ``IN_SERVICE`` and training jobs ``InProgress``; and CloudTrail's
  ``RunInstances`` of an accelerator type (prefixes derived from
  :func:`costguard.domain.guardrails.family_patterns`, as ``costguard guardrails`` does),
  which names who launched it. That rule fires only where a CloudTrail trail records
  management events: without one, the state-change rule still covers every instance.
  EKS managed node groups need no rule: their nodes are EC2 instances, whose own state
  changes are matched (the Lambda reads the node group's tags).
- **Rules** (:class:`LaunchRules`) on the default bus, one per pattern, all with one
  target: the on-launch Lambda (home region) or another event bus (forwarding).
- **Forwarding** (:class:`LaunchForwarder`): the same rules targeting another bus (the home
  region's, or an Organization hub's) through a role that may only ``events:PutEvents``
  on that one bus. Undeliverable events go to an encrypted dead-letter queue.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from costguard.adapters.catalog import read_catalog_file
from costguard.cli.guardrails import sdk_instance_types
from costguard.domain.guardrails import accelerator_families, family_patterns
from costguard.domain.launch_events import (
    API_CALL,
    EC2_STATE_CHANGE,
    ENDPOINT_STATE_CHANGE,
    LAUNCH_STATES,
    NOTEBOOK_STATE_CHANGE,
    TRAINING_STATE_CHANGE,
)
from costguard.domain.models import ResourceKind

if TYPE_CHECKING:
    from aws_cdk import aws_kms as kms
    from aws_cdk import aws_lambda as lambda_

#: How often EventBridge retries a delivery to the Lambda (then the target's DLQ), and for
#: how long: a launch alert an hour late is still worth sending (the handler refuses
#: events older than ``costguard.domain.calendar.MAX_EVENT_AGE``).
TARGET_RETRIES = 8
TARGET_MAX_EVENT_AGE = cdk.Duration.hours(1)
DEAD_LETTER_RETENTION = cdk.Duration.days(14)


def _event_spelling(kind: ResourceKind, state: str) -> tuple[str, ...]:
    """The status as the event spells it. SageMaker's endpoint events say ``IN_SERVICE``
    where DescribeEndpoint (and :data:`LAUNCH_STATES`) say ``InService``: both are matched,
    the handler reads either."""
    if kind is ResourceKind.SAGEMAKER_ENDPOINT:
        snake = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(state)).upper()
        return (snake, state)
    return (state,)


def _statuses(kind: ResourceKind) -> list[str]:
    return [s for state in sorted(LAUNCH_STATES[kind]) for s in _event_spelling(kind, state)]


@functools.cache
def accelerator_type_prefixes() -> tuple[str, ...]:
    """EC2 instance-type prefixes of every accelerator family CostGuard knows (the packaged
    catalog's and the estimate table's), each as short as is safe against every type the
    installed SDK names: ``p5`` covers p5, p5e and p5en, and a later p5 generation too,
    but no prefix covers a family that is not an accelerator (``p`` would cover p2)."""
    catalog = read_catalog_file()
    known = {t for rates in catalog.ec2.values() for t in rates}
    known |= {
        k for k in catalog.unpriced_reasons if "/" not in k and "." in k and not k.startswith("ml.")
    }
    ec2_universe, _sagemaker = sdk_instance_types()
    patterns = family_patterns(accelerator_families(known), ec2_universe)
    return tuple(p.removesuffix("*") for p in patterns)


def launch_patterns(type_prefixes: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Construct id -> EventBridge event pattern, one per kind of launch event."""
    prefixes = accelerator_type_prefixes() if type_prefixes is None else tuple(type_prefixes)
    return {
        "Ec2StateChange": {
            "source": ["aws.ec2"],
            "detail-type": [EC2_STATE_CHANGE],
            "detail": {"state": _statuses(ResourceKind.EC2_INSTANCE)},
        },
        "NotebookInService": {
            "source": ["aws.sagemaker"],
            "detail-type": [NOTEBOOK_STATE_CHANGE],
            "detail": {"NotebookInstanceStatus": _statuses(ResourceKind.SAGEMAKER_NOTEBOOK)},
        },
        "EndpointInService": {
            "source": ["aws.sagemaker"],
            "detail-type": [ENDPOINT_STATE_CHANGE],
            "detail": {"EndpointStatus": _statuses(ResourceKind.SAGEMAKER_ENDPOINT)},
        },
        "TrainingJobInProgress": {
            "source": ["aws.sagemaker"],
            "detail-type": [TRAINING_STATE_CHANGE],
            "detail": {"TrainingJobStatus": _statuses(ResourceKind.SAGEMAKER_TRAINING_JOB)},
        },
        # Only where a trail records management events; RunInstances from a launch
        # template without an instance type in the call is matched by the state change.
        "RunAcceleratorInstances": {
            "source": ["aws.ec2"],
            "detail-type": [API_CALL],
            "detail": {
                "eventSource": ["ec2.amazonaws.com"],
                "eventName": ["RunInstances"],
                "errorCode": [{"exists": False}],
                "requestParameters": {"instanceType": [{"prefix": p} for p in prefixes]},
            },
        },
    }


def _pattern(raw: Mapping[str, Any]) -> events.EventPattern:
    return events.EventPattern(
        source=raw["source"], detail_type=raw["detail-type"], detail=raw["detail"]
    )


class LaunchRules(Construct):
    """One rule per launch pattern on the default bus, each with ``target``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        target: events.IRuleTarget,
        what: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        for name, raw in launch_patterns().items():
            self.rules[name] = events.Rule(
                self,
                name,
                description=f"CostGuard: {name} -> {what}",
                event_pattern=_pattern(raw),
                targets=[target],
            )


def encrypted_dead_letters(
    scope: Construct, construct_id: str, key: kms.IKey | None = None
) -> sqs.Queue:
    """A dead-letter queue for a rule target: the stack's key where there is one (the
    key policy lets EventBridge use it), else SQS-managed encryption (a forwarding stack
    has no key of its own, and EventBridge needs no key grant for it); TLS only."""
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.KMS if key is not None else sqs.QueueEncryption.SQS_MANAGED,
        encryption_master_key=key,
        enforce_ssl=True,
        retention_period=DEAD_LETTER_RETENTION,
    )
    # cdk-nag recognises a queue as a DLQ only when another queue or a Lambda names it;
    # a rule target's DLQ is named by the target. Acknowledged on this queue only.
    cdk.Validations.of(queue).acknowledge(
        cdk.Acknowledgment(
            id="AwsSolutions-SQS3",
            reason=(
                "this queue is the dead-letter queue of EventBridge rule targets (launch "
                "events that could not be delivered); a dead-letter queue of its own would "
                "only move them, and its depth alarms where the stack has an alert topic"
            ),
        )
    )
    return queue


def lambda_target(
    function: lambda_.IFunction, dead_letter_queue: sqs.IQueue
) -> targets.LambdaFunction:
    """EventBridge invokes the Lambda asynchronously; a delivery that fails (throttled past
    its retries, or refused) is kept in ``dead_letter_queue``."""
    return targets.LambdaFunction(
        function,
        dead_letter_queue=dead_letter_queue,
        retry_attempts=TARGET_RETRIES,
        max_event_age=TARGET_MAX_EVENT_AGE,
    )


def default_bus_arn(stack: cdk.Stack, *, account: str, region: str) -> str:
    return f"arn:{stack.partition}:events:{region}:{account}:event-bus/default"


class LaunchForwarder(Construct):
    """The launch rules of this account and region, forwarding to the default bus of
    ``account`` in ``region``: a role EventBridge assumes that may only
    ``events:PutEvents`` on that bus, and a dead-letter queue for what cannot be sent."""

    def __init__(
        self, scope: Construct, construct_id: str, *, account: str, region: str, what: str
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.bus_arn = default_bus_arn(stack, account=account, region=region)
        bus = events.EventBus.from_event_bus_arn(self, "Target", self.bus_arn)
        self.role = iam.Role(
            self,
            "Role",
            description=f"CostGuard: EventBridge forwards launch events to {what}",
            assumed_by=iam.ServicePrincipal(
                "events.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            ),
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["events:PutEvents"], resources=[self.bus_arn])
        )
        self.dead_letter_queue = encrypted_dead_letters(self, "Undelivered")
        self.rules = LaunchRules(
            self,
            "Rules",
            target=targets.EventBus(bus, dead_letter_queue=self.dead_letter_queue, role=self.role),
            what=what,
        )


def forwarded_regions(home: str | None, regions: Sequence[str]) -> list[str]:
    """The scanned regions that need a forwarding stack: all but the home region. None
    when the home region is not known at synth (an environment-agnostic stack): its
    region is a deploy-time token, and a forwarding rule must name its target bus's."""
    if not home or cdk.Token.is_unresolved(home):
        return []
    return [r for r in dict.fromkeys(regions) if r != home]


class LaunchForwardingStack(cdk.Stack):
    """One scanned region's launch rules, forwarding to the home region's default bus of
    the same account (where the on-launch Lambda's rules match them again)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, home_region: str, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"CostGuard: forward this region's accelerator launches to {home_region}",
            # No asset, no lookup: deployed with the CLI's credentials, so the scanned
            # regions need no `cdk bootstrap` of their own.
            synthesizer=cdk.BootstraplessSynthesizer(),
            **kwargs,
        )
        self.forwarder = LaunchForwarder(
            self,
            "LaunchForwarding",
            account=self.account,
            region=home_region,
            what=f"CostGuard's default bus in {home_region}",
        )
        cdk.CfnOutput(
            self,
            "UndeliveredQueueUrl",
            description="Launch events that could not be forwarded",
            value=self.forwarder.dead_letter_queue.queue_url,
        )
