"""Which member accounts the Organization's guards may act in."""

from __future__ import annotations

from costguard.domain.directory import select_accounts
from costguard.domain.tags import Tags
from costguard.services.org_act import guarded_accounts
from tests.support.clock import MIDDAY

A, B = "222222222222", "333333333333"


def test_guards_do_not_act_in_an_account_whose_opt_out_tag_is_not_understood() -> None:
    """An owner tags the account `costguard:opt-out=yes` (or `1`, or `true` with a
    zero-width space): the listing reports the value as unclear and the read-only scan
    still covers it, but the guards act there too and delete its volumes. An opt-out
    nobody could read is already kept out of the guards; one nobody could *understand*
    says "leave us alone" just as plainly (a malformed `costguard:exempt` is exempt)."""
    # GIVEN account A tagged opt-out "yes" and account B not tagged
    listing = select_accounts(
        [(A, "ACTIVE"), (B, "ACTIVE")],
        {A: {Tags.ORG_OPT_OUT: "yes"}, B: {}},
        Tags.ORG_OPT_OUT,
        MIDDAY,
    )
    assert A in listing.unclear  # reported, and scanned (read-only)
    # WHEN the guards decide where they may act
    acted_in = guarded_accounts(listing)
    # THEN B is guarded and A, whose owner asked (unclearly) to be left out, is not
    assert acted_in == (B,)
