"""Studio on botocore's Stubber (moto has no Studio apps or spaces): the app actuator,
the inventory reader and the idle-shutdown findings, with real-shaped responses that
Stubber also checks against SageMaker's model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.adapters.sagemaker_actuator import StudioAppActuator, space_arn
from costguard.adapters.studio import StudioInventory
from costguard.domain.decisions import Action, Decision, Target
from costguard.domain.findings import FindingCode
from costguard.domain.studio import app_target_id, parse_app_target_id
from costguard.domain.tags import Tags
from costguard.iam import tag_conditioned
from costguard.ports import SourceError
from tests.support.iam_eval import allowed

REGION = "us-east-1"
DOMAIN = "d-abc123def456"
SPACE = "team-space"
APP_ARN = f"arn:aws:sagemaker:{REGION}:123456789012:app/{DOMAIN}/{SPACE}/JupyterLab/default"
SPACE_ARN = f"arn:aws:sagemaker:{REGION}:123456789012:space/{DOMAIN}/{SPACE}"
TID = app_target_id(DOMAIN, SPACE, "JupyterLab", "default")
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


class OneClient:
    account = "123456789012"

    def __init__(self, client: Any) -> None:
        self.client = client

    def sagemaker(self, region: str) -> Any:
        return self.client


@pytest.fixture
def sm() -> tuple[Any, Stubber]:
    client = boto3.client("sagemaker", region_name=REGION)
    return client, Stubber(client)


def target() -> Target:
    return Target(
        key=f"{REGION}/sagemaker-studio-app/{TID}",
        kind="sagemaker-studio-app",
        region=REGION,
        id=TID,
        project="vision",
    )


def described(status: str = "InService") -> dict[str, Any]:
    return {
        "AppArn": APP_ARN,
        "AppType": "JupyterLab",
        "AppName": "default",
        "DomainId": DOMAIN,
        "SpaceName": SPACE,
        "Status": status,
        "CreationTime": T0 - timedelta(hours=5),
        "LastUserActivityTimestamp": T0 - timedelta(hours=3),
        "ResourceSpec": {"InstanceType": "ml.g5.xlarge"},
    }


APP_PARAMS = {"DomainId": DOMAIN, "SpaceName": SPACE, "AppType": "JupyterLab", "AppName": "default"}


def test_target_id_round_trips_and_refuses_ambiguity() -> None:
    assert f"{DOMAIN}/{SPACE}/JupyterLab/default" == TID
    assert parse_app_target_id(TID) == (DOMAIN, SPACE, "JupyterLab", "default")
    assert APP_ARN.endswith(":app/" + TID)
    assert space_arn(APP_ARN) == SPACE_ARN
    for bad in (
        "d-abc/space/JupyterLab",
        "d-abc/sp ace/JupyterLab/default",
        "x-abc/s/JupyterLab/a",
        f"{TID}/extra",
        "d-abc/s/Jupyter/Lab/a",
        "d-abc/-s/JupyterLab/a",
        "d-abc/s/JupyterLab/a\n",
    ):
        with pytest.raises(ValueError):
            parse_app_target_id(bad)


def test_inspect_reads_the_app_and_honours_the_spaces_live_exemption(sm: Any) -> None:
    client, stub = sm
    # GIVEN an app carrying the project (propagated) whose space has since been exempted
    stub.add_response("describe_app", described(), APP_PARAMS)
    stub.add_response(
        "list_tags", {"Tags": [{"Key": Tags.PROJECT, "Value": "vision"}]}, {"ResourceArn": APP_ARN}
    )
    stub.add_response(
        "list_tags",
        {"Tags": [{"Key": Tags.EXEMPT, "Value": "2027-01-31"}]},
        {"ResourceArn": SPACE_ARN},
    )
    with stub:
        seen = StudioAppActuator(OneClient(client)).inspect([target()]).get(target().key)
    # THEN the executor sees the app's tags (what IAM checks) with the space's exemption
    assert seen is not None and not seen.settled and seen.state == "InService"
    assert seen.tags == {Tags.PROJECT: "vision", Tags.EXEMPT: "2027-01-31"}


def test_an_iam_blocking_exemption_on_the_app_is_never_hidden_by_the_space() -> None:
    from costguard.adapters.sagemaker_actuator import with_space_exemption

    assert with_space_exemption({Tags.EXEMPT: "TRUE"}, "2020-01-01")[Tags.EXEMPT] == "TRUE"
    assert with_space_exemption({Tags.EXEMPT: "2020-01-01"}, "true")[Tags.EXEMPT] == "true"
    assert with_space_exemption({Tags.PROJECT: "v"}, None) == {Tags.PROJECT: "v"}


def test_a_gone_app_is_none_and_a_deleting_one_is_settled(sm: Any) -> None:
    client, stub = sm
    stub.add_client_error("describe_app", "ResourceNotFound", "App does not exist")
    stub.add_response("describe_app", described("Deleting"), APP_PARAMS)
    stub.add_client_error("list_tags", "ValidationException", "resource is being deleted")
    with stub:
        actuator = StudioAppActuator(OneClient(client))
        assert actuator.inspect([target()]) == {}
        seen = actuator.inspect([target()]).get(target().key)
    assert seen is not None and seen.settled


def test_marks_the_app_with_the_warning_tag_only_and_deletes_the_app_not_the_space(sm: Any) -> None:
    client, stub = sm
    stub.add_response("describe_app", described(), APP_PARAMS)
    stub.add_response(
        "list_tags", {"Tags": [{"Key": Tags.PROJECT, "Value": "vision"}]}, {"ResourceArn": APP_ARN}
    )
    stub.add_response("list_tags", {"Tags": []}, {"ResourceArn": SPACE_ARN})
    stub.add_response(
        "add_tags",
        {"Tags": []},
        {
            "ResourceArn": APP_ARN,
            "Tags": [{"Key": Tags.ACTION_AFTER, "Value": "2026-11-21T12:00:00Z"}],
        },
    )
    stub.add_response("delete_app", {}, APP_PARAMS)
    # after DeleteApp the app is Deleting and refuses tag changes: unmark must not fail
    stub.add_client_error("delete_tags", "ValidationException", "App is in Deleting state")
    stub.add_response("describe_app", described("Deleting"), APP_PARAMS)
    d = Decision(
        Action.DELETE_APP,
        target(),
        "no user activity for 3 hours",
        T0,
        usd_per_hour_saved=Decimal("1.41"),
    )
    with stub:
        actuator = StudioAppActuator(OneClient(client))
        actuator.inspect([target()])
        actuator.mark(target(), Tags.ACTION_AFTER, "2026-11-21T12:00:00Z")
        detail = actuator.apply(d)
        actuator.unmark(target(), Tags.ACTION_AFTER)
        stub.assert_no_pending_responses()
    assert "space and its storage are kept" in detail


def test_unmark_fails_when_a_running_app_refuses_the_untag(sm: Any) -> None:
    client, stub = sm
    stub.add_response("describe_app", described(), APP_PARAMS)
    stub.add_client_error("delete_tags", "ValidationException", "something else")
    stub.add_response("describe_app", described("InService"), APP_PARAMS)
    with stub, pytest.raises(SourceError):
        StudioAppActuator(OneClient(client)).unmark(target(), Tags.ACTION_AFTER)


def test_delete_app_is_refused_by_iam_unless_the_app_itself_is_in_scope() -> None:
    perms = StudioAppActuator.permissions
    for p in perms:
        if p.mutating:
            assert tag_conditioned(p.conditions) and all(":app/" in r for r in p.resources), p
    # The space's tags do not count for IAM: an app without propagated tags is refused.
    assert not allowed(perms, "sagemaker:DeleteApp", APP_ARN, {})
    assert allowed(perms, "sagemaker:DeleteApp", APP_ARN, {Tags.PROJECT: "vision"})
    assert not allowed(
        perms, "sagemaker:DeleteApp", APP_ARN, {Tags.PROJECT: "v", Tags.EXEMPT: "true"}
    )
    assert not allowed(perms, "sagemaker:DeleteApp", SPACE_ARN, {Tags.PROJECT: "vision"})
    assert not allowed(perms, "sagemaker:DeleteSpace", SPACE_ARN, {Tags.PROJECT: "vision"})
    assert not allowed(perms, "sagemaker:AddTags", APP_ARN, {Tags.PROJECT: "v"}, [Tags.PROJECT])
    assert allowed(perms, "sagemaker:DeleteTags", APP_ARN, {}, [Tags.ACTION_AFTER])


def test_inventory_lists_old_running_jupyterlab_apps_with_activity_and_skips_the_rest(
    sm: Any,
) -> None:
    client, stub = sm
    base = {
        "DomainId": DOMAIN,
        "Status": "InService",
        "ResourceSpec": {"InstanceType": "ml.g5.xlarge"},
    }
    stub.add_response(
        "list_apps",
        {
            "Apps": [
                {
                    **base,
                    "SpaceName": SPACE,
                    "AppType": "JupyterLab",
                    "AppName": "default",
                    "CreationTime": T0 - timedelta(hours=5),
                },
                {
                    **base,
                    "SpaceName": "young",
                    "AppType": "CodeEditor",
                    "AppName": "default",
                    "CreationTime": T0 - timedelta(minutes=10),
                },
                {
                    **base,
                    "SpaceName": SPACE,
                    "AppType": "JupyterLab",
                    "AppName": "old",
                    "Status": "Deleted",
                    "CreationTime": T0 - timedelta(days=3),
                },
                {
                    **base,
                    "UserProfileName": "bob",
                    "AppType": "KernelGateway",
                    "AppName": "k",
                    "CreationTime": T0 - timedelta(days=3),
                },
            ],
            "NextToken": "page2",
        },
    )
    stub.add_response("list_apps", {"Apps": []}, {"NextToken": "page2"})
    stub.add_response("describe_app", described(), APP_PARAMS)
    stub.add_response(
        "list_tags", {"Tags": [{"Key": Tags.PROJECT, "Value": "vision"}]}, {"ResourceArn": APP_ARN}
    )
    stub.add_response("list_tags", {"Tags": []}, {"ResourceArn": SPACE_ARN})
    with stub:
        apps = StudioInventory(OneClient(client)).apps(
            REGION, created_before=T0 - timedelta(hours=1)
        )
        stub.assert_no_pending_responses()
    old, young = apps
    assert (old.space_name, old.last_user_activity, old.arn) == (
        SPACE,
        T0 - timedelta(hours=3),
        APP_ARN,
    )
    assert old.tags == {Tags.PROJECT: "vision"} and old.instance_type == "ml.g5.xlarge"
    # too young to have been idle for the window: not described, activity unknown
    assert (young.space_name, young.app_type, young.last_user_activity) == (
        "young",
        "CodeEditor",
        None,
    )


def test_reports_domains_and_spaces_without_idle_shutdown_or_tag_propagation(sm: Any) -> None:
    client, stub = sm
    on = {
        "AppLifecycleManagement": {
            "IdleSettings": {"LifecycleManagement": "ENABLED", "IdleTimeoutInMinutes": 60}
        }
    }
    stub.add_response("list_domains", {"Domains": [
        {"DomainId": "d-good1", "DomainName": "good", "Status": "InService"},
        {"DomainId": "d-bad22", "DomainName": "bad", "Status": "InService"},
    ]})  # fmt: skip
    stub.add_response("describe_domain", {"DomainId": "d-good1", "DomainName": "good", "TagPropagation": "ENABLED",
        "DefaultUserSettings": {"JupyterLabAppSettings": on, "CodeEditorAppSettings": on},
        "DefaultSpaceSettings": {"JupyterLabAppSettings": on}}, {"DomainId": "d-good1"})  # fmt: skip
    stub.add_response("describe_domain", {"DomainId": "d-bad22", "DomainName": "bad",
        "DefaultUserSettings": {"JupyterLabAppSettings": {"AppLifecycleManagement": {"IdleSettings": {"LifecycleManagement": "DISABLED"}}}, "CodeEditorAppSettings": on},
        "DefaultSpaceSettings": {"JupyterLabAppSettings": on}}, {"DomainId": "d-bad22"})  # fmt: skip
    stub.add_response("list_spaces", {"Spaces": [
        {"DomainId": "d-bad22", "SpaceName": "mine", "SpaceSettingsSummary": {"AppType": "JupyterLab"}, "SpaceSharingSettingsSummary": {"SharingType": "Private"}},
        {"DomainId": "d-bad22", "SpaceName": "ours", "SpaceSettingsSummary": {"AppType": "JupyterLab"}, "SpaceSharingSettingsSummary": {"SharingType": "Shared"}},
        {"DomainId": "d-bad22", "SpaceName": "code", "SpaceSettingsSummary": {"AppType": "CodeEditor"}, "SpaceSharingSettingsSummary": {"SharingType": "Private"}},
    ]}, {"DomainIdEquals": "d-bad22"})  # fmt: skip
    with stub:
        findings = StudioInventory(OneClient(client)).idle_shutdown_gaps(REGION)
        stub.assert_no_pending_responses()
    got = {(f.code, f.resource) for f in findings}
    assert got == {
        (FindingCode.STUDIO_IDLE_SHUTDOWN_OFF, f"{REGION}/sagemaker-domain/d-bad22"),
        (FindingCode.STUDIO_TAGS_NOT_PROPAGATED, f"{REGION}/sagemaker-domain/d-bad22"),
        (FindingCode.STUDIO_IDLE_SHUTDOWN_OFF, f"{REGION}/sagemaker-space/d-bad22/mine"),
    }
    assert "private JupyterLab spaces" in next(
        f.message
        for f in findings
        if f.resource.endswith("d-bad22") and f.code is FindingCode.STUDIO_IDLE_SHUTDOWN_OFF
    )
