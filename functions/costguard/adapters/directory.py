"""The Organization's directory on the ledger table (and in memory).

=============================  ===========================  ===========================================
pk                             sk                           what
=============================  ===========================  ===========================================
``ORG#<scope>#DIR``            ``ACCOUNTS``                 the account list, when last discovered
``ORG#<scope>#DIR``            ``REGIONS#<account>``        an account's opted-in regions, or why not
``ORG#<scope>#DIR``            ``SLICE#<account>/<region>`` unprobed / active / empty, as of when
=============================  ===========================  ===========================================

One partition, read by the fan-out with one ``Query`` a tick (800 slices are about
120 KB: one or two pages), so a tick neither lists the Organization nor reads an item per
slice. Every update is a compare-and-set on the item's ``version`` (read, decide in the
domain, conditional put; on a lost race read again): two consumers racing on one slice
apply both decisions in some order, and each decision sees the value it replaces.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from costguard.adapters.ddb import expression, from_item, items_of, pk_sk, to_item, written
from costguard.adapters.dynamodb import parse_stamp, stamp
from costguard.domain.directory import (
    AccountListing,
    AccountRegions,
    Directory,
    SliceState,
    SliceStatus,
)
from costguard.domain.org import Slice

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: What :class:`DynamoDbDirectory` calls (tests/functional/test_directory_contract.py reads
#: its source and checks this list): within the ledger table's grant of both Lambdas.
DIRECTORY_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query")
#: A compare-and-set gives up after this many lost races (each one means progress elsewhere).
MAX_ATTEMPTS = 8

#: The two kinds of versioned directory item.
V = TypeVar("V", SliceStatus, AccountRegions)


class DirectoryConflictError(RuntimeError):
    """An item kept changing under us: more concurrent writers than attempts."""


def _t(item: Mapping[str, Any], name: str) -> datetime | None:
    value = item.get(name)
    return parse_stamp(value) if value else None


def _ids(values: tuple[str, ...]) -> bytes:
    """Account ids, compressed: about 6 bytes an account instead of about 17 as a list,
    so that an Organization of 50,000 accounts still fits one 400 KB item."""
    return zlib.compress(",".join(values).encode(), 9)


def _read_ids(item: Mapping[str, Any], name: str) -> tuple[str, ...]:
    raw = item.get(name)
    if raw is None:
        return ()
    text = zlib.decompress(bytes(raw)).decode()
    return tuple(text.split(",")) if text else ()


class DynamoDbDirectory:
    def __init__(self, client: DynamoDBClient, table_name: str, scope: str) -> None:
        self._ddb = client
        self._table = table_name
        self._pk = f"ORG#{scope}#DIR"

    # -- reads ------------------------------------------------------------------------------

    def load(self) -> Directory:
        pages = self._ddb.get_paginator("query").paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=to_item({":pk": self._pk}),
            ConsistentRead=True,
        )
        listing = None
        regions: dict[str, AccountRegions] = {}
        slices: dict[Slice, SliceStatus] = {}
        for item in items_of(pages):
            sk = str(item["sk"])
            if sk == "ACCOUNTS":
                listing = _listing(item)
            elif sk.startswith("REGIONS#"):
                entry = _regions(sk.removeprefix("REGIONS#"), item)
                regions[entry.account] = entry
            elif sk.startswith("SLICE#"):
                status = _slice(Slice.parse(sk.removeprefix("SLICE#")), item)
                slices[status.slice] = status
        return Directory(listing, regions, slices)

    def _get(self, sk: str) -> dict[str, Any] | None:
        item = self._ddb.get_item(
            TableName=self._table, Key=pk_sk(self._pk, sk), ConsistentRead=True
        ).get("Item")
        return from_item(item) if item else None

    def listing(self) -> AccountListing | None:
        """The stored account listing alone (one item read, not the whole directory)."""
        item = self._get("ACCOUNTS")
        return _listing(item) if item else None

    # -- writes -----------------------------------------------------------------------------

    def _put(self, item: Mapping[str, Any], condition: str, values: Mapping[str, Any]) -> bool:
        """Write the item; False when ``condition`` refused it."""
        return written(
            lambda: self._ddb.put_item(
                TableName=self._table,
                Item=to_item({"pk": self._pk, **item}),
                **expression(condition, None, values),
            )
        )

    def save_listing(self, listing: AccountListing) -> None:
        """A slower, older refresh never overwrites a newer one."""
        item = {
            "sk": "ACCOUNTS",
            "accounts": _ids(listing.accounts),
            "refreshed_at": stamp(listing.refreshed_at),
            "source": listing.source,
            "opted_out": _ids(listing.opted_out),
            "inactive": _ids(listing.inactive),
            # at most 100 odd opt-out values are kept (each cut to 64 characters)
            "unclear": dict(list(listing.unclear.items())[:100]),
            # the accounts whose tags could not be read, with why (at most 100; each
            # is already in accounts or opted_out, so this is only for reporting)
            "untagged": dict(sorted(listing.untagged.items())[:100]),
        }
        condition = "attribute_not_exists(pk) OR refreshed_at < :at"
        self._put(item, condition, {":at": stamp(listing.refreshed_at)})

    def update_slice(
        self, s: Slice, change: Callable[[SliceStatus], SliceStatus | None]
    ) -> SliceStatus | None:
        return self._update(
            f"SLICE#{s.key}",
            lambda item: _slice(s, item) if item else SliceStatus(s),
            change,
            _slice_item,
        )

    def update_regions(
        self, account: str, change: Callable[[AccountRegions], AccountRegions | None]
    ) -> AccountRegions | None:
        Slice(account, "us-east-1")  # a 12-digit id, or ValueError before any write
        return self._update(
            f"REGIONS#{account}",
            lambda item: _regions(account, item) if item else AccountRegions(account),
            change,
            _regions_item,
        )

    def _update(
        self,
        sk: str,
        read: Callable[[dict[str, Any] | None], V],
        change: Callable[[V], V | None],
        write: Callable[[V], dict[str, Any]],
    ) -> V | None:
        for _ in range(MAX_ATTEMPTS):
            current = read(self._get(sk))
            new = change(current)
            if new is None:
                return None
            new = replace(new, version=current.version + 1)
            item = {"sk": sk, **write(new), "version": new.version}
            if current.version == 0:
                written = self._put(item, "attribute_not_exists(pk)", {})
            else:
                written = self._put(item, "version = :v", {":v": current.version})
            if written:
                return new
            # another writer won: decide again on its value
        raise DirectoryConflictError(f"{sk} changed {MAX_ATTEMPTS} times while being updated")


def _listing(item: Mapping[str, Any]) -> AccountListing:
    refreshed = _t(item, "refreshed_at")
    assert refreshed is not None
    return AccountListing(
        accounts=_read_ids(item, "accounts"),
        refreshed_at=refreshed,
        source=str(item.get("source", "discover")),
        opted_out=_read_ids(item, "opted_out"),
        inactive=_read_ids(item, "inactive"),
        unclear={k: str(v) for k, v in item.get("unclear", {}).items()},
        untagged={k: str(v) for k, v in item.get("untagged", {}).items()},
    )


def _regions(account: str, item: Mapping[str, Any]) -> AccountRegions:
    return AccountRegions(
        account=account,
        regions=tuple(item.get("regions", ())),
        discovered_at=_t(item, "discovered_at"),
        failed_at=_t(item, "failed_at"),
        failure=str(item.get("failure", "")),
        version=int(item.get("version", 0)),
    )


def _regions_item(e: AccountRegions) -> dict[str, Any]:
    return {
        "regions": list(e.regions),
        "discovered_at": _s(e.discovered_at),
        "failed_at": _s(e.failed_at),
        "failure": e.failure,
    }


def _s(moment: datetime | None) -> str | None:
    return stamp(moment) if moment is not None else None


def _slice(s: Slice, item: Mapping[str, Any]) -> SliceStatus:
    return SliceStatus(
        slice=s,
        state=SliceState(item.get("state", SliceState.UNPROBED.value)),
        as_of=_t(item, "as_of"),
        checked_at=_t(item, "checked_at"),
        failed_at=_t(item, "failed_at"),
        failure=str(item.get("failure", "")),
        active_until=_t(item, "active_until"),
        version=int(item.get("version", 0)),
    )


def _slice_item(st: SliceStatus) -> dict[str, Any]:
    return {
        "state": st.state.value,
        "as_of": _s(st.as_of),
        "checked_at": _s(st.checked_at),
        "failed_at": _s(st.failed_at),
        "failure": st.failure,
        "active_until": _s(st.active_until),
    }


class InMemoryDirectory:
    """The same contract in memory (tests/functional/test_directory_contract.py)."""

    def __init__(self) -> None:
        self._listing: AccountListing | None = None
        self._regions: dict[str, AccountRegions] = {}
        self._slices: dict[Slice, SliceStatus] = {}
        self._lock = threading.Lock()

    def load(self) -> Directory:
        with self._lock:
            return Directory(self._listing, dict(self._regions), dict(self._slices))

    def listing(self) -> AccountListing | None:
        with self._lock:
            return self._listing

    def save_listing(self, listing: AccountListing) -> None:
        with self._lock:
            if self._listing is None or self._listing.refreshed_at < listing.refreshed_at:
                self._listing = listing

    def update_slice(
        self, s: Slice, change: Callable[[SliceStatus], SliceStatus | None]
    ) -> SliceStatus | None:
        return self._update(self._slices, s, SliceStatus(s), change)

    def update_regions(
        self, account: str, change: Callable[[AccountRegions], AccountRegions | None]
    ) -> AccountRegions | None:
        Slice(account, "us-east-1")
        return self._update(self._regions, account, AccountRegions(account), change)

    def _update(
        self, items: dict[Any, V], key: Any, blank: V, change: Callable[[V], V | None]
    ) -> V | None:
        """The DynamoDB store's compare-and-set: decide outside the lock, write only if
        nobody wrote in between, else decide again on the newer value."""
        for _ in range(MAX_ATTEMPTS):
            with self._lock:
                current = items.get(key, blank)
            new = change(current)
            if new is None:
                return None
            with self._lock:
                if items.get(key, blank).version != current.version:
                    continue
                new = replace(new, version=current.version + 1)
                items[key] = new
                return new
        raise DirectoryConflictError(f"{key} changed {MAX_ATTEMPTS} times while being updated")
