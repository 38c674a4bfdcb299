"""Whose launches the check reads: this deployment's account, an Organization's members
through their read role, and nobody else's (moto's STS)."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.adapters.aws import ClientFactory
from costguard.services.launch import AccountNotWatched
from costguard.settings import Settings
from costguard.wiring.launch import readers_for
from tests.support.clock import MIDDAY

HUB = "123456789012"
MEMBER = "111111111111"


def settings(**env: str) -> Settings:
    return Settings.from_env({"COSTGUARD_REGIONS": "us-east-1", "COSTGUARD_SCOPE": HUB, **env})


def test_one_account_reads_its_own_launches_and_refuses_any_other(aws: Any) -> None:
    # GIVEN a single-account deployment in 123456789012
    readers = readers_for(settings(), aws, ClientFactory(aws, account=HUB))
    # WHEN an event names this account  THEN it is read here
    assert readers(HUB).account == HUB
    # WHEN an event names another account (a forged or misrouted event)
    # THEN refused, before any call into it
    with pytest.raises(AccountNotWatched, match=MEMBER):
        readers(MEMBER)


def test_an_organization_hub_enters_a_listed_member_through_its_read_role(aws: Any) -> None:
    # GIVEN a hub whose deployment lists one member account
    hub = settings(COSTGUARD_ORG_ACCOUNTS=MEMBER, COSTGUARD_ORG_ID="o-abc1234567")
    readers = readers_for(hub, aws, ClientFactory(aws, account=HUB))
    # WHEN the member's launch event comes  THEN it is read in the member account
    assert readers(MEMBER).account == MEMBER
    # and the hub's own account is read with the hub's own credentials
    assert readers(HUB).account == HUB
    # WHEN an account outside the list sends one  THEN refused
    with pytest.raises(AccountNotWatched, match="member accounts"):
        readers("222222222222")


def test_with_discover_any_account_is_tried_through_its_read_role(aws: Any) -> None:
    # GIVEN a hub that discovers its members (the hub bus admits only the Organization)
    hub = settings(COSTGUARD_ORG_ACCOUNTS="discover", COSTGUARD_ORG_ID="o-abc1234567")
    readers = readers_for(hub, aws, ClientFactory(aws, account=HUB))
    # THEN a member is entered through its read role (moto's STS lets it in)
    assert readers("333333333333").account == "333333333333"


def test_with_discover_an_opted_out_or_inactive_account_is_refused_at_launch(aws: Any) -> None:
    # GIVEN a hub that discovers its members, whose listing says one account opted out
    # (costguard:opt-out=true on the account) and one is suspended
    from costguard.adapters.directory import DynamoDbDirectory
    from costguard.domain.directory import AccountListing
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    ddb = aws.client("dynamodb", region_name="us-east-1")
    DynamoDbDirectory(ddb, "ledger", HUB).save_listing(
        AccountListing(
            ("333333333333",),
            MIDDAY,
            "discovered",
            opted_out=("444444444444",),
            inactive=("555555555555",),
        )
    )
    hub = settings(
        COSTGUARD_ORG_ACCOUNTS="discover",
        COSTGUARD_ORG_ID="o-abc1234567",
        COSTGUARD_TABLE_NAME="ledger",
    )
    readers = readers_for(hub, aws, ClientFactory(aws, account=HUB))
    # WHEN their launch events come  THEN refused, before entering them
    with pytest.raises(AccountNotWatched, match="opted out"):
        readers("444444444444")
    with pytest.raises(AccountNotWatched, match="not active"):
        readers("555555555555")
    # and a guarded member is entered through its read role
    assert readers("333333333333").account == "333333333333"
