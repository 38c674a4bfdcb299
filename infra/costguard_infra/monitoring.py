"""Alarms that tell the operators when the guard itself is not guarding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from costguard.telemetry import Metrics

if TYPE_CHECKING:
    from aws_cdk import aws_scheduler as scheduler
    from aws_cdk import aws_sqs as sqs

    from costguard_infra.guard_function import GuardFunction


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Sequence[tuple[str, GuardFunction]],
        topic: sns.ITopic,
        scan_every_minutes: int,
        scan_schedules: scheduler.IScheduleGroup | None = None,
        dead_letter_queues: Sequence[tuple[str, sqs.IQueue, str]] = (),
    ) -> None:
        """``scan_schedules``: an Organization hub, whose heartbeat is the invocation
        attempts of its scan fan-out's schedule group (there is no single-account scan
        then, and the guards' schedules invoke the fan-out too, so the fan-out's own
        invocations would hide a stopped scan); ``dead_letter_queues``: more queues whose
        messages mean failed work, as (construct id, queue, description)."""
        super().__init__(scope, construct_id)
        action = actions.SnsAction(topic)
        self.alarms: list[cw.Alarm] = []
        five = cdk.Duration.minutes(5)
        for name, guard in functions:
            fn = guard.function
            for metric, label in (
                (fn.metric_errors(period=five, statistic="Sum"), "errors"),
                (fn.metric_throttles(period=five, statistic="Sum"), "throttles"),
            ):
                self._alarm(
                    f"{name}{label.title()}",
                    metric,
                    f"CostGuard {name} Lambda {label}: the guard may be missing spend",
                    action,
                )
            self._alarm(
                f"{name}DeadLetters",
                guard.dead_letter_queue.metric_approximate_number_of_messages_visible(
                    period=five, statistic="Maximum"
                ),
                f"CostGuard {name}: failed invocations in the dead-letter queue",
                action,
            )
        for alarm_id, queue, description in dead_letter_queues:
            self._alarm(
                alarm_id,
                queue.metric_approximate_number_of_messages_visible(
                    period=five, statistic="Maximum"
                ),
                description,
                action,
            )
        # No ScanCompleted for two intervals means nobody is watching the spend; in an
        # Organization hub, no scan tick sent to the fan-out (the fan-out's failures and
        # the schedule's dead letters have their own alarms).
        window = cdk.Duration.minutes(max(2 * scan_every_minutes, 10))
        heartbeat: cw.IMetric = cw.Metric(
            namespace=Metrics.NAMESPACE,
            metric_name=Metrics.SCAN_COMPLETED,
            dimensions_map={Metrics.DIMENSION_SERVICE: Metrics.SCAN_SERVICE},
            period=window,
            statistic="Sum",
        )
        if scan_schedules is not None:
            heartbeat = scan_schedules.metric_attempts(period=window, statistic="Sum")
        missing = cw.Alarm(
            self,
            "ScanMissing" if scan_schedules is None else "FanoutMissing",
            alarm_description=(
                "CostGuard: no scan completed in two scan intervals"
                if scan_schedules is None
                else "CostGuard hub: the Organization scan fan-out was not invoked in two "
                "scan intervals"
            ),
            metric=heartbeat,
            threshold=1,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.BREACHING,
        )
        missing.add_alarm_action(action)
        missing.add_ok_action(action)
        self.alarms.append(missing)

    def _alarm(
        self, construct_id: str, metric: cw.IMetric, description: str, action: actions.SnsAction
    ) -> None:
        alarm = cw.Alarm(
            self,
            construct_id,
            alarm_description=description,
            metric=metric,
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        alarm.add_alarm_action(action)
        self.alarms.append(alarm)
