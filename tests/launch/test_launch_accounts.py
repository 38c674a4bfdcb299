"""Whose launches the check reads: this deployment's account, an Organization's members
through their read role, and nobody else's (moto's STS)."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.adapters.aws import ClientFactory
from costguard.services.launch import AccountNotWatched
from costguard.settings import Settings
from costguard.wiring.launch import readers_for

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
