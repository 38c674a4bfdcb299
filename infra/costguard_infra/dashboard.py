"""The CostGuard dashboard: every project's (and team's) budget, spend, forecast and run-rate.

Per-project figures come from the scan's structured log lines (Logs Insights), not
from custom metrics: projects are only known at run time (they come from tags), and
four custom metrics per project would be most of CostGuard's own bill. Projects
named in the configuration's central table also get a widget set of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from costguard.telemetry import Figures as F
from costguard.telemetry import Metrics

_FIGURES = f'filter {F.EVENT_KEY} = "{F.EVENT}"'


def query_literal(text: str) -> str:
    """A Logs Insights string literal: backslashes and double quotes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def all_projects_query() -> str:
    """The latest figures of every project, most expensive forecast first."""
    return (
        f"{_FIGURES}"
        f" | stats latest({F.FORECAST}) as forecast, latest({F.BUDGET}) as budget,"
        f" latest({F.MONTH_TO_DATE}) as month_to_date, latest({F.RUN_RATE}) as usd_per_hour,"
        f" latest({F.STATUS}) as status, latest({F.TEAM}) as team by {F.PROJECT}"
        " | sort forecast desc"
    )


def all_teams_query() -> str:
    """The latest figures of every team (each the sum of its projects), most expensive
    forecast first."""
    return (
        f'filter {F.EVENT_KEY} = "{F.TEAM_EVENT}"'
        f" | stats latest({F.FORECAST}) as forecast, latest({F.BUDGET}) as budget,"
        f" latest({F.MONTH_TO_DATE}) as month_to_date, latest({F.RUN_RATE}) as usd_per_hour,"
        f" latest({F.STATUS}) as status by {F.TEAM}"
        " | sort forecast desc"
    )


def project_query(project: str) -> str:
    """One project's budget, month-to-date and forecast over time."""
    return (
        f"{_FIGURES} and {F.PROJECT} = {query_literal(project)}"
        f" | stats max({F.BUDGET}) as budget, max({F.MONTH_TO_DATE}) as month_to_date,"
        f" max({F.FORECAST}) as forecast by bin(1h)"
    )


def price_catalog_query() -> str:
    """Which price catalog the latest scans used, and how old its rates for the scanned
    regions are; ``stale`` is 1 when they are older than the configured limit."""
    return (
        f'filter {F.EVENT_KEY} = "{F.CATALOG_EVENT}"'
        f" | stats latest({F.CATALOG_SOURCE}) as source, latest({F.CATALOG_VERSION}) as version,"
        f" latest({F.CATALOG_AS_OF}) as as_of, latest({F.CATALOG_AGE_DAYS}) as age_days,"
        f" latest({F.CATALOG_STALE}) as stale by bin(1d)"
        " | sort bin(1d) desc"
    )


def savings_query() -> str:
    return (
        f'filter {F.EVENT_KEY} = "{F.ACTION_EVENT}"'
        f" | stats sum({F.SAVINGS}) as usd_per_month_saved by {F.PROJECT}, {F.OUTCOME}"
    )


class Dashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        projects: Sequence[str],
        scan_logs: Sequence[logs.ILogGroup],
        action_logs: Sequence[logs.ILogGroup] = (),
        price_catalog_max_age_days: int = 30,
    ) -> None:
        """``scan_logs``: where the figures are written (the scan's log group; in an
        Organization hub the consumer's and the fan-out's, either of which aggregates)."""
        super().__init__(scope, construct_id)
        figure_groups = [g.log_group_name for g in scan_logs]
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.days(7))
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    "# CostGuard\nEvery project's latest forecast, budget, month-to-date and "
                    "run-rate (USD), from each scan. A forecast above its budget is a project "
                    "heading over budget."
                ),
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cw.LogQueryWidget(
                title="All projects: forecast, budget, month-to-date, run-rate",
                log_group_names=figure_groups,
                query_string=all_projects_query(),
                view=cw.LogQueryVisualizationType.TABLE,
                width=24,
                height=8,
            ),
            cw.GraphWidget(
                title="Scans completed (the guard is guarding)",
                left=[
                    cw.Metric(
                        namespace=Metrics.NAMESPACE,
                        metric_name=Metrics.SCAN_COMPLETED,
                        dimensions_map={Metrics.DIMENSION_SERVICE: Metrics.SCAN_SERVICE},
                        statistic="Sum",
                        period=cdk.Duration.hours(1),
                    )
                ],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.LogQueryWidget(
                title="All teams (each the sum of its projects): forecast, budget, month-to-date",
                log_group_names=figure_groups,
                query_string=all_teams_query(),
                view=cw.LogQueryVisualizationType.TABLE,
                width=24,
                height=6,
            )
        )
        self.dashboard.add_widgets(
            cw.LogQueryWidget(
                title=(
                    "Price catalog the scan uses (stored or bundled) and its age in days; "
                    f"WARNING when stale = 1 (older than {price_catalog_max_age_days} days)"
                ),
                log_group_names=figure_groups,
                query_string=price_catalog_query(),
                view=cw.LogQueryVisualizationType.TABLE,
                width=12,
            )
        )
        if action_logs:
            self.dashboard.add_widgets(
                cw.LogQueryWidget(
                    title="Savings from actions $/month, by project and outcome",
                    log_group_names=[g.log_group_name for g in action_logs],
                    query_string=savings_query(),
                    view=cw.LogQueryVisualizationType.TABLE,
                    width=12,
                )
            )
        for project in projects:
            self.dashboard.add_widgets(
                cw.LogQueryWidget(
                    title=f"{project}: budget, month-to-date, forecast",
                    log_group_names=figure_groups,
                    query_string=project_query(project),
                    view=cw.LogQueryVisualizationType.LINE,
                    width=12,
                )
            )

    def add_org_widgets(
        self, *, queue: sqs.IQueue, dead_letters: sqs.IQueue, consumer: lambda_.IFunction
    ) -> None:
        """The Organization hub: is the work keeping up, and is any of it failing."""
        self._queue_widgets(
            queue,
            dead_letters,
            consumer,
            titles=(
                "Hub work queue: waiting, in flight, dead-lettered",
                "Hub: oldest work item (s) and consumers running",
            ),
            labels=("oldest item (s)", "consumers"),
            errors=False,
        )

    def add_act_widgets(
        self, *, queue: sqs.IQueue, dead_letters: sqs.IQueue, consumer: lambda_.IFunction
    ) -> None:
        """The Organization hub's guards: are the guard runs keeping up, is any failing."""
        self._queue_widgets(
            queue,
            dead_letters,
            consumer,
            titles=(
                "Hub guard runs (act queue): waiting, in flight, dead-lettered",
                "Hub guards: oldest guard run (s), act consumers running, Lambda errors",
            ),
            labels=("oldest run (s)", "act consumers"),
            errors=True,
        )

    def _queue_widgets(
        self,
        queue: sqs.IQueue,
        dead_letters: sqs.IQueue,
        consumer: lambda_.IFunction,
        *,
        titles: tuple[str, str],
        labels: tuple[str, str],
        errors: bool,
    ) -> None:
        """A queue and its consumer: waiting, in flight and dead-lettered; the oldest
        message's age against the consumers running (and their errors)."""
        five = cdk.Duration.minutes(5)
        right = [
            consumer.metric(
                "ConcurrentExecutions", period=five, statistic="Maximum", label=labels[1]
            )
        ]
        if errors:
            right.append(consumer.metric_errors(period=five, statistic="Sum", label="errors"))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title=titles[0],
                left=[
                    queue.metric_approximate_number_of_messages_visible(
                        period=five, statistic="Maximum", label="waiting"
                    ),
                    queue.metric_approximate_number_of_messages_not_visible(
                        period=five, statistic="Maximum", label="in flight"
                    ),
                    dead_letters.metric_approximate_number_of_messages_visible(
                        period=five, statistic="Maximum", label="dead letters"
                    ),
                ],
                width=12,
            ),
            cw.GraphWidget(
                title=titles[1],
                left=[
                    queue.metric_approximate_age_of_oldest_message(
                        period=five, statistic="Maximum", label=labels[0]
                    )
                ],
                right=right,
                width=12,
            ),
        )
