"""EventBridge Scheduler schedules; each passes its scheduled time as the event's ``time``."""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from costguard_infra.grants import grant_encrypted_queue_writes


class GuardSchedule(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        every_minutes: int,
        dead_letter_queue: sqs.IQueue,
        key: kms.IKey,
        description: str,
        payload: Mapping[str, str] | None = None,
        group: scheduler.IScheduleGroup | None = None,
    ) -> None:
        """``group``: a schedule group of its own (None: the account's default group)."""
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        group_arn = (
            group.schedule_group_arn
            if group is not None
            else (
                f"arn:{stack.partition}:scheduler:{stack.region}:{stack.account}"
                ":schedule-group/default"
            )
        )
        # Our own role rather than the target's shared one, so that it can be granted
        # the dead-letter queue's key (the target grants invoke and SendMessage only).
        self.role = iam.Role(
            self,
            "Role",
            description=f"CostGuard {construct_id}: EventBridge Scheduler invokes the function",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={
                    "StringEquals": {
                        "aws:SourceAccount": stack.account,
                        "aws:SourceArn": group_arn,
                    }
                },
            ),
        )
        grant_encrypted_queue_writes(dead_letter_queue, self.role)
        # The target grants invoke on the function's versions and aliases (``<arn>:*``):
        # acknowledged on this role only, naming the one function it may invoke.
        fn_child = function.node.default_child
        if isinstance(fn_child, cdk.CfnElement):
            logical = stack.get_logical_id(fn_child)
            cdk.Validations.of(self.role).acknowledge(
                cdk.Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::<{logical}.Arn>:*]",
                    reason=(
                        "EventBridge Scheduler's role may invoke the versions and aliases of "
                        f"this schedule's function ({construct_id}), and nothing else"
                    ),
                )
            )
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            description=description,
            schedule=scheduler.ScheduleExpression.rate(cdk.Duration.minutes(every_minutes)),
            key=key,
            schedule_group=group,
            target=targets.LambdaInvoke(
                function,
                # The scheduled time, not the Lambda's clock, is "now": a retried
                # invocation then accrues exactly the same interval, once.
                input=scheduler.ScheduleTargetInput.from_object(
                    {"time": scheduler.ContextAttribute.scheduled_time, **(payload or {})}
                ),
                dead_letter_queue=dead_letter_queue,
                role=self.role,
                retry_attempts=2,
                max_event_age=cdk.Duration.hours(1),
            ),
        )
