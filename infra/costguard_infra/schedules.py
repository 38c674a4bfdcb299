"""EventBridge Scheduler schedules; each passes its scheduled time as the event's ``time``."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct


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
    ) -> None:
        super().__init__(scope, construct_id)
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            description=description,
            schedule=scheduler.ScheduleExpression.rate(cdk.Duration.minutes(every_minutes)),
            key=key,
            target=targets.LambdaInvoke(
                function,
                # The scheduled time, not the Lambda's clock, is "now": a retried
                # invocation then accrues exactly the same interval, once.
                input=scheduler.ScheduleTargetInput.from_object(
                    {"time": scheduler.ContextAttribute.scheduled_time}
                ),
                dead_letter_queue=dead_letter_queue,
                retry_attempts=2,
                max_event_age=cdk.Duration.hours(1),
            ),
        )
