"""AWS Organizations: the accounts the hub guards, and their opt-out tag.

Called by the fan-out at most once a day (the list is kept in the directory), from the
management account or a delegated administrator: ``organizations:ListAccounts`` (20
accounts a page) and ``organizations:ListTagsForResource`` for each ACTIVE account
(:data:`costguard.iam.ORG_DISCOVERY`). Organizations is a global service whose endpoint
is in us-east-1 for the commercial partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from costguard.adapters.aws import AWS_ERRORS, translate
from costguard.domain.directory import DiscoveryError
from costguard.domain.text import truncate
from costguard.iam import ORG_DISCOVERY

PERMISSIONS = ORG_DISCOVERY


def organizations_region(home: str) -> str:
    """The region of the Organizations endpoint in the hub's partition."""
    if home.startswith("us-gov-"):
        return "us-gov-west-1"
    if home.startswith("cn-"):
        return "cn-northwest-1"
    return "us-east-1"


class OrganizationsClient(Protocol):
    """The two paginated operations the discovery calls (no mypy_boto3 stubs are installed
    for Organizations; this keeps the boundary typed)."""

    def get_paginator(self, operation_name: Any) -> Any: ...


@contextmanager
def _listing(operation: str) -> Iterator[None]:
    try:
        yield
    except AWS_ERRORS as exc:  # refused, unreachable, or an answer that is no answer (HTML)
        # translate keeps one readable line: an error's message can be a whole HTML page.
        failed = translate("organizations", "", operation, exc)
        raise DiscoveryError(failed.code, truncate(f"{operation}: {failed.detail}", 300)) from exc


class OrganizationAccounts:
    """:class:`costguard.services.fanout.AccountSource` on the Organizations API."""

    def __init__(self, client: OrganizationsClient) -> None:
        self._org = client

    def accounts(self) -> list[tuple[str, str]]:
        """(id, state) of every account. ``State`` (ACTIVE, SUSPENDED, PENDING_CLOSURE,
        CLOSED, PENDING_ACTIVATION) replaces the older ``Status``; either is read."""
        with _listing("ListAccounts"):
            return [
                (str(a["Id"]), str(a.get("State") or a.get("Status") or ""))
                for page in self._org.get_paginator("list_accounts").paginate()
                for a in page.get("Accounts", [])
            ]

    def tags(self, account: str) -> dict[str, str]:
        with _listing("ListTagsForResource"):
            return {
                str(t["Key"]): str(t.get("Value", ""))
                for page in self._org.get_paginator("list_tags_for_resource").paginate(
                    ResourceId=account
                )
                for t in page.get("Tags", [])
            }
