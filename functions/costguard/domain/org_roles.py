"""The fixed role names of an Organization deployment (hub and member stacks, and the hub's
Lambdas), defined once."""

from __future__ import annotations

from typing import Final


class OrgRoles:
    """The roles of an Organization deployment: the hub's, and each member account's.

    Fixed names, so that the member stack (a StackSet, deployed before or after the hub)
    can name the hub's roles in its trust policy, and the hub can name the member roles it
    assumes in every account without a lookup.
    """

    #: The hub's scan consumers (and ``costguard scan --accounts`` users) assume this in members.
    MEMBER_READ: Final = "costguard-member-read"
    #: The hub's guards assume this in members: tag-conditioned mutations only.
    MEMBER_ACT: Final = "costguard-member-act"
    #: The hub's roles that may assume them (in the hub account).
    HUB_SCAN: Final = "costguard-hub-scan"
    HUB_ACT: Final = "costguard-hub-act"
    #: The hub's on-launch Lambda: reads one launched resource through the member read role.
    HUB_LAUNCH: Final = "costguard-hub-launch"
    #: Whom each member role trusts: narrow on both sides, so that neither side alone
    #: (the hub role's own policy, the member role's trust) keeps a hub role out of a
    #: member role it has no business in. The scan consumer reads (its scans, probes and
    #: region reads); only the act consumer, which enters no account through the read
    #: role, acts. The fan-out assumes nothing. The on-launch Lambda reads one resource
    #: a member's launch event names, through the read role (never the act role).
    READ_TRUSTS: Final = (HUB_SCAN, HUB_LAUNCH)
    ACT_TRUSTS: Final = (HUB_ACT,)
