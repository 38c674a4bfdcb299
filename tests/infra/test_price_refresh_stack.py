"""The price-refresh Lambda in the synthesized stack: its schedule, its IAM (the Price List
API on its role only, the catalog's items of the ledger table only), where the catalog is
stored (the ledger table: no bucket), its alarms and the dashboard's staleness widget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costguard.env import Env
from costguard.iam import CATALOG_PARTITION, CATALOG_STORE_ACTIONS
from costguard.settings import ENV_VARS, ORG_ENV_VARS
from costguard.telemetry import Figures, Metrics
from tests.infra.iam_model import World, as_list, role_may

pytestmark = pytest.mark.infra

REFRESH = "costguard.handlers.refresh.handler"


@pytest.fixture(scope="module")
def world(body: dict[str, Any]) -> World:
    return World(body)


def _function(world: World, handler: str) -> str:
    (logical,) = [
        f
        for f, fn in world.resources("AWS::Lambda::Function").items()
        if fn["Properties"]["Handler"] == handler
    ]
    return logical


def test_the_refresh_lambda_runs_weekly_with_the_scheduled_time_and_a_dlq(
    template: Any, world: World
) -> None:
    from aws_cdk.assertions import Match

    fn = world.resources("AWS::Lambda::Function")[_function(world, REFRESH)]["Properties"]
    assert fn["Architectures"] == ["arm64"] and fn["TracingConfig"] == {"Mode": "Active"}
    assert "DeadLetterConfig" in fn
    variables = fn["Environment"]["Variables"]
    # Every variable Settings reads is set (the refresh reads the regions, table and hold %).
    # It is no guard's Lambda, and not the Organization hub's.
    assert set(ENV_VARS) - {Env.GUARD} - set(ORG_ENV_VARS) <= set(variables)
    assert not set(ORG_ENV_VARS) & set(variables)
    assert variables[Env.SERVICE_NAME] == Metrics.REFRESH_SERVICE
    assert variables[Env.PRICE_CHANGE_HOLD_PCT] == "50"
    template.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {
            "ScheduleExpression": "rate(7 days)",
            "Target": Match.object_like(
                {
                    "Arn": {"Fn::GetAtt": [_function(world, REFRESH), "Arn"]},
                    "Input": '{"time":"<aws.scheduler.scheduled-time>"}',
                    "DeadLetterConfig": Match.any_value(),
                }
            ),
        },
    )


def test_only_the_refresh_role_may_read_the_price_list_api(world: World) -> None:
    refresh = world.function_role(_function(world, REFRESH))
    assert role_may(world, refresh, "pricing:GetProducts", "*")
    others = [f for f in world.resources("AWS::Lambda::Function") if f != _function(world, REFRESH)]
    assert len(others) >= 3
    for logical in others:
        role = world.function_role(logical)
        assert not role_may(world, role, "pricing:GetProducts", "*"), logical


def test_the_refresh_role_may_touch_only_the_catalogs_items_of_the_ledger_table(
    world: World,
) -> None:
    (table,) = world.resources("AWS::DynamoDB::Table")
    table_arn = world.arn(table)
    role = world.function_role(_function(world, REFRESH))
    granted = {
        a
        for s in world.role_statements(role)
        for a in as_list(s["Action"])
        if a.startswith("dynamodb:")
    }
    assert granted == set(CATALOG_STORE_ACTIONS)
    catalog = {"dynamodb:LeadingKeys": CATALOG_PARTITION}
    for action in CATALOG_STORE_ACTIONS:
        assert role_may(world, role, action, table_arn, catalog)
        # Not the spend, the audit trail or the claims: any other partition is refused.
        assert not role_may(world, role, action, table_arn, {"dynamodb:LeadingKeys": "SCOPE#1"})
        assert not role_may(
            world, role, action, table_arn.replace("table/", "table/other-"), catalog
        )
    key = world.key_arn_of(world.resolve(world.props(table)["SSESpecification"]["KMSMasterKeyId"]))
    via = {
        "kms:ViaService": "dynamodb.us-east-1.amazonaws.com",
        "kms:CallerAccount": "123456789012",
    }
    assert role_may(world, role, "kms:Decrypt", key, via)


def test_the_scan_role_reads_the_catalog_with_its_ledger_get_item(world: World) -> None:
    (table,) = world.resources("AWS::DynamoDB::Table")
    scan = world.function_role(_function(world, "costguard.handlers.scan.handler"))
    assert role_may(world, scan, "dynamodb:GetItem", world.arn(table))


def test_the_catalog_is_stored_in_the_ledger_table_not_a_bucket(template: Any) -> None:
    assert template.find_resources("AWS::S3::Bucket") == {}
    assert len(template.find_resources("AWS::DynamoDB::Table")) == 1


def test_the_refresh_lambda_has_its_own_alarms(world: World) -> None:
    refresh = _function(world, REFRESH)
    watched = json.dumps(
        [
            a["Properties"].get("Dimensions")
            for a in world.resources("AWS::CloudWatch::Alarm").values()
        ]
    )
    assert watched.count(refresh) == 2  # errors and throttles; the DLQ alarm names its queue


def test_the_dashboard_warns_of_a_stale_price_catalog(template: Any) -> None:
    (dashboard,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert Figures.CATALOG_EVENT in body and Figures.CATALOG_STALE in body
    assert "older than 30 days" in body
