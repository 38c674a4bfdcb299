"""The permission declarations against the calls the code makes (no synth, no AWS).

The ledger's DynamoDB actions are read from the adapter's source: every
``self._ddb.<method>(…)`` and ``get_paginator("<method>")`` it contains, with
``TransactWriteItems`` counted per item kind, as IAM authorizes it.
"""

from __future__ import annotations

import ast
import inspect

import boto3
import pytest

from costguard.adapters import dynamodb
from costguard.iam import LEDGER_ACTIONS, S3_STORAGE, all_actions, scan_permissions

_ITEM_ACTIONS = {
    "Update": "UpdateItem",
    "Put": "PutItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _is_client(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "_ddb"


def _item_kinds(scope: ast.AST) -> set[str]:
    return {
        key.value
        for sub in ast.walk(scope)
        if isinstance(sub, ast.Dict)
        for key in sub.keys
        if isinstance(key, ast.Constant) and key.value in _ITEM_ACTIONS
    }


def ledger_iam_actions(module: object = dynamodb) -> set[str]:
    """The IAM actions a DynamoDB adapter's code needs, read from its source."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    api = client.meta.method_to_api_mapping
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    actions: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and _is_client(node.func.value)
            ):
                continue
            method = node.func.attr
            if method == "get_paginator":
                (arg,) = node.args
                assert isinstance(arg, ast.Constant), "paginate a literal operation"
                method = str(arg.value)
            operation = api[method]
            if operation == "TransactWriteItems":
                # IAM authorizes each item by its kind; the items are built in this method
                kinds = _item_kinds(function)
                assert kinds, f"{function.name}: a transaction without a recognisable item kind"
                actions |= {f"dynamodb:{_ITEM_ACTIONS[k]}" for k in kinds}
            else:
                actions.add(f"dynamodb:{operation}")
    return actions


def test_the_ledger_is_granted_exactly_the_dynamodb_actions_its_code_calls() -> None:
    from costguard.iam import EXECUTOR_LEDGER_ACTIONS

    # GIVEN the calls written in adapters/dynamodb.py
    needed = ledger_iam_actions()
    assert {"dynamodb:Query", "dynamodb:UpdateItem"} <= needed  # the reader found the calls
    # THEN the scan's and the executor's declarations together grant each of them, and
    # nothing the code never calls (each role's use is checked by the IAM-enforced runs)
    granted = set(LEDGER_ACTIONS) | set(EXECUTOR_LEDGER_ACTIONS)
    assert sorted(needed - granted) == [], "called but not granted"
    assert sorted(granted - needed) == [], "granted but never called"


@pytest.mark.parametrize(
    ("tags", "studio", "present", "absent"),
    [
        ("tagging-api", True, {"tag:GetResources", "sagemaker:ListApps"}, {"sagemaker:ListTags"}),
        ("per-resource", False, {"sagemaker:ListTags"}, {"sagemaker:ListApps"}),
    ],
)
def test_sagemaker_grants_follow_the_configured_tag_reader_and_studio_switch(
    tags: str, studio: bool, present: set[str], absent: set[str]
) -> None:
    granted = scan_permissions(sagemaker_tags=tags, sagemaker_studio=studio)
    actions = all_actions(granted)
    assert present <= actions
    assert not absent & actions
    if tags == "per-resource":
        # S3 storage reads bucket tags through the tagging API in every configuration
        # (once a day): SageMaker's own tagging-API statement is what the switch removes.
        tagging = [p for p in granted if "tag:GetResources" in p.actions]
        assert tagging == [p for p in S3_STORAGE if "tag:GetResources" in p.actions]


def test_cost_explorer_is_granted_only_when_enabled() -> None:
    assert not {"ce:GetCostAndUsage"} & all_actions(scan_permissions())
    assert {"ce:GetCostAndUsage", "ce:GetAnomalies"} <= all_actions(
        scan_permissions(cost_explorer=True)
    )


def test_the_refresh_is_granted_exactly_the_dynamodb_actions_the_catalog_store_calls() -> None:
    from costguard.adapters import catalog_store
    from costguard.iam import CATALOG_STORE_ACTIONS

    needed = ledger_iam_actions(catalog_store)
    assert needed == set(CATALOG_STORE_ACTIONS)
    # The scan reads the stored catalog with an action it already holds on the ledger.
    assert "dynamodb:GetItem" in LEDGER_ACTIONS


def test_the_price_list_api_is_not_a_scan_permission() -> None:
    from costguard.iam import refresh_permissions

    assert "pricing:GetProducts" in all_actions(refresh_permissions())
    for cost_explorer in (False, True):
        assert "pricing:GetProducts" not in all_actions(
            scan_permissions(cost_explorer=cost_explorer)
        )
