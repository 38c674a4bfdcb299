"""``costguard scan --org``: the Organization's accounts, opt-out honoured, from a laptop."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard import cli
from costguard.cli import common
from tests.functional.test_org_slices import T0, _launch


@pytest.fixture
def session(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(common, "session", lambda _args: aws)
    monkeypatch.delenv("COSTGUARD_REGIONS", raising=False)
    monkeypatch.setenv("COSTGUARD_SAGEMAKER_STUDIO", "false")  # moto has no ListApps
    return aws


def _organization(session: Any) -> tuple[str, list[str]]:
    org = session.client("organizations", region_name="us-east-1")
    org.create_organization(FeatureSet="ALL")
    made = [
        org.create_account(AccountName=f"ml{n}", Email=f"ml{n}@example.com")["CreateAccountStatus"][
            "AccountId"
        ]
        for n in range(3)
    ]
    management = org.describe_organization()["Organization"]["MasterAccountId"]
    return management, made


def test_scans_the_organization_except_opted_out_and_suspended_accounts(
    session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN GPUs in ml0 and ml1, ml1 tagged opt-out ("TRUE"), ml2 closed
    management, (ml0, ml1, ml2) = _organization(session)
    org = session.client("organizations", region_name="us-east-1")
    org.tag_resource(ResourceId=ml1, Tags=[{"Key": "costguard:opt-out", "Value": "TRUE"}])
    org.close_account(AccountId=ml2)
    _launch(session, ml0, "us-east-1", "llm", T0)
    _launch(session, ml1, "us-east-1", "secret", T0)
    # WHEN the Organization is scanned
    code = cli.main(["scan", "--org", "--region", "us-east-1", "--json"])
    out, err = capsys.readouterr()
    # THEN the management account and ml0 are scanned; ml1 and ml2 are named as skipped
    assert code == 0, err
    doc = json.loads(out)["data"]
    assert sorted(doc["accounts"]) == sorted([management, ml0])
    assert "2 accounts of the Organization to scan" in err
    assert f"1 opted out ({ml1})" in err and f"1 not active ({ml2})" in err
    projects = {p["project"] for p in doc["accounts"][ml0]["projects"]}
    assert "llm" in projects


def test_says_where_to_run_it_when_the_organization_cannot_be_listed(
    session: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN credentials of a member account (ListAccounts is refused)
    real_client = session.client

    def client(name: str, *args: Any, **kwargs: Any) -> Any:
        made = real_client(name, *args, **kwargs)
        if name == "organizations":
            stub = Stubber(made)
            stub.add_client_error(
                "list_accounts",
                "AccessDeniedException",
                "You don't have permissions to access this resource.",
                400,
            )
            stub.activate()
        return made

    monkeypatch.setattr(session, "client", client)
    # WHEN --org is used THEN it exits 1 and says what to do
    assert cli.main(["scan", "--org", "--region", "us-east-1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "AccessDeniedException" in err and "management account" in err


def test_org_and_accounts_are_mutually_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["scan", "--org", "--accounts", "111111111111", "--region", "us-east-1"]) == 2


def test_one_account_s_unreadable_tags_do_not_stop_the_others_being_scanned(
    session: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an Organization where reading ml1's tags is throttled on every try
    from botocore.exceptions import ClientError

    _management, (ml0, ml1, _ml2) = _organization(session)
    _launch(session, ml0, "us-east-1", "llm", T0)
    real_client = session.client

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if params.get("ResourceId") == ml1:
            raise ClientError(
                {"Error": {"Code": "TooManyRequestsException", "Message": "Rate exceeded"}},
                "ListTagsForResource",
            )

    def client(name: str, *args: Any, **kwargs: Any) -> Any:
        made = real_client(name, *args, **kwargs)
        if name == "organizations":
            made.meta.events.register(
                "provide-client-params.organizations.ListTagsForResource", refuse
            )
        return made

    monkeypatch.setattr(session, "client", client)
    # WHEN the Organization is scanned
    code = cli.main(["scan", "--org", "--region", "us-east-1", "--json"])
    out, err = capsys.readouterr()
    # THEN every account is scanned (an unreadable opt-out tag is not an opt-out), and ml1 is named
    assert code == 0, err
    assert {ml0, ml1} <= set(json.loads(out)["data"]["accounts"])
    assert ml1 in err and "tags could not be read" in err
