"""The CostGuard dashboard: every project's budget, spend, forecast, run-rate and actions.

Projects are only known at run time (they come from tags), so the all-projects
widgets use CloudWatch ``SEARCH``; projects named in the configuration's central
table also get a widget set of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from costguard.names import Metrics

_HOUR = cdk.Duration.hours(1)


def _search(metric_name: str, label: str) -> cw.MathExpression:
    return cw.MathExpression(
        expression=(
            f"SEARCH('{{{Metrics.NAMESPACE},{Metrics.DIMENSION_PROJECT}}} "
            f"MetricName=\"{metric_name}\"', 'Maximum', 3600)"
        ),
        label=label,
        period=_HOUR,
        using_metrics={},
    )


def _project_metric(
    project: str, metric_name: str, label: str, statistic: str = "Maximum"
) -> cw.Metric:
    return cw.Metric(
        namespace=Metrics.NAMESPACE,
        metric_name=metric_name,
        dimensions_map={Metrics.DIMENSION_PROJECT: project},
        statistic=statistic,
        period=_HOUR,
        label=label,
    )


class Dashboard(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, projects: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.days(7))
        self.dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    "# CostGuard\nMonth-to-date and forecast per project (USD), from each scan. "
                    "A forecast line above its budget line is a project heading over budget."
                ),
                width=24,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Forecast month-end, all projects",
                left=[_search(Metrics.FORECAST, "")],
                width=12,
            ),
            cw.GraphWidget(
                title="Month-to-date, all projects",
                left=[_search(Metrics.MONTH_TO_DATE, "")],
                width=12,
            ),
            cw.GraphWidget(
                title="Run-rate $/h, all projects", left=[_search(Metrics.RUN_RATE, "")], width=12
            ),
            cw.GraphWidget(
                title="Savings from actions $/month",
                left=[_search(Metrics.ACTION_SAVINGS, "")],
                width=12,
            ),
        )
        for project in projects:
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title=f"{project}: budget, month-to-date, forecast",
                    left=[
                        _project_metric(project, Metrics.BUDGET, "budget"),
                        _project_metric(project, Metrics.MONTH_TO_DATE, "month-to-date"),
                        _project_metric(project, Metrics.FORECAST, "forecast"),
                    ],
                    width=12,
                ),
                cw.SingleValueWidget(
                    title=f"{project}: run-rate $/h",
                    metrics=[_project_metric(project, Metrics.RUN_RATE, "run-rate")],
                    width=4,
                ),
                cw.SingleValueWidget(
                    title=f"{project}: savings $/month",
                    metrics=[_project_metric(project, Metrics.ACTION_SAVINGS, "savings", "Sum")],
                    width=4,
                ),
                cw.SingleValueWidget(
                    title=f"{project}: actions taken",
                    metrics=[_project_metric(project, Metrics.ACTIONS_TAKEN, "actions", "Sum")],
                    width=4,
                ),
            )
