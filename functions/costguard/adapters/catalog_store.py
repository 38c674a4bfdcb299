"""The deployed price catalog, versioned, in the ledger table.

=====================  =============================  ===========================================
pk                     sk                             what
=====================  =============================  ===========================================
``CATALOG``            ``CURRENT``                    the catalog the scan reads (one GetItem)
``CATALOG``            ``VERSION#<nnnnnnnnnn>``       every version ever stored (audit, rollback)
=====================  =============================  ===========================================

Each item holds the catalog's JSON document zlib-compressed (about 6 KB for the bundled
catalog, far under DynamoDB's 400 KB item limit), its version, ``as_of`` and when it was
stored. A new version is one ``TransactWriteItems``: the ``CURRENT`` item replaced only
if it still holds the version the writer started from, and the history item created only
if that version number is new. Two refreshes racing cannot interleave: the second is
refused whole and merges again on top of the first.

The key is a constant, not a scope: list prices are the same for every account, and the
refresh role is allowed only items whose partition key is ``CATALOG``
(``dynamodb:LeadingKeys``).
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from costguard.adapters.aws import AWS_ERRORS, translate
from costguard.adapters.catalog import (
    CatalogError,
    CatalogFile,
    overlay,
    parse_catalog,
    rate_book,
    read_catalog_file,
    rebase,
)
from costguard.adapters.ddb import expression, pk_sk, to_item, written
from costguard.adapters.dynamodb import ITEM_BUDGET_BYTES, parse_stamp, stamp
from costguard.domain.catalog_merge import BUNDLED, BUNDLED_AND_STORED, STORED, CatalogInUse
from costguard.domain.pricing import PriceCatalog
from costguard.iam import CATALOG_PARTITION
from costguard.ports import CatalogStore, CatalogStoreError, StoredCatalog

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

PARTITION = CATALOG_PARTITION
CURRENT = "CURRENT"


HISTORY = "VERSION#"


def version_key(version: int) -> str:
    return f"{HISTORY}{version:010d}"


def encode_document(document: Mapping[str, Any]) -> bytes:
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return zlib.compress(text.encode("utf-8"), 9)


def decode_document(blob: bytes, version: int | None = None) -> dict[str, Any]:
    try:
        document = json.loads(zlib.decompress(blob).decode("utf-8"))
    except (zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogStoreError(
            f"the stored price catalog is not readable: {exc}", version=version
        ) from None
    if not isinstance(document, dict):
        raise CatalogStoreError("the stored price catalog is not a JSON object", version=version)
    return document


class DynamoDbCatalogStore:
    """:class:`costguard.ports.CatalogStore` on the ledger table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._ddb = client
        self._table = table_name

    def _read(self, sk: str) -> StoredCatalog | None:
        # Eventually consistent: half the read units, and a catalog written once a week
        # does not need the newest second.
        item = self._ddb.get_item(TableName=self._table, Key=pk_sk(PARTITION, sk)).get("Item")
        if item is None:
            return None
        version: int | None = None
        try:
            version = int(item["version"]["N"])
            stored_at = parse_stamp(item["stored_at"]["S"])
            blob = item["data"]["B"]
        except (KeyError, ValueError, TypeError) as exc:
            raise CatalogStoreError(
                f"the stored price catalog item {sk} is malformed: {exc!r}", version=version
            ) from None
        return StoredCatalog(version, stored_at, decode_document(blob, version))

    def current(self) -> StoredCatalog | None:
        return self._read(CURRENT)

    def latest_version(self) -> int:
        # The history's sort keys are zero-padded: the last one is the highest version.
        found = self._ddb.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :history)",
            ExpressionAttributeValues=to_item({":pk": PARTITION, ":history": HISTORY}),
            ProjectionExpression="sk",
            ScanIndexForward=False,
            Limit=1,
        ).get("Items", [])
        if not found:
            return 0
        return int(found[0]["sk"]["S"].removeprefix(HISTORY))

    def get(self, version: int) -> StoredCatalog | None:
        return self._read(version_key(version))

    def put(
        self, document: Mapping[str, Any], *, expected_version: int, at: datetime
    ) -> int | None:
        version = int(document["version"])
        if version <= expected_version:
            raise CatalogStoreError(
                f"a new catalog version must be above {expected_version}, got {version}"
            )
        blob = encode_document(document)
        if len(blob) > ITEM_BUDGET_BYTES:
            raise CatalogStoreError(
                f"the price catalog compresses to {len(blob)} bytes; an item holds 400 KB"
            )
        attrs = {
            "pk": PARTITION,
            "version": version,
            "stored_at": stamp(at),
            "as_of": str(document.get("as_of", "")),
            "data": blob,
        }
        if expected_version == 0:
            condition = expression("attribute_not_exists(pk)")
        else:
            condition = expression(
                "#v = :expected", {"#v": "version"}, {":expected": expected_version}
            )
        current = {"TableName": self._table, "Item": to_item({**attrs, "sk": CURRENT}), **condition}
        history = {
            "TableName": self._table,
            "Item": to_item({**attrs, "sk": version_key(version)}),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        items = cast("list[TransactWriteItemTypeDef]", [{"Put": current}, {"Put": history}])
        if not written(lambda: self._ddb.transact_write_items(TransactItems=items)):
            return None
        return version


#: What leaves the stored catalog unread (the bundled one is used): the store's own
#: error, or any failed call (:data:`~costguard.adapters.aws.AWS_ERRORS`).
_UNREADABLE: tuple[type[Exception], ...] = (CatalogStoreError, *AWS_ERRORS)
#: How long a warm Lambda reuses the catalog it read: a refresh is seen within minutes.
CATALOG_REUSE_S = 300.0


class CatalogCache:
    """What a warm Lambda keeps between invocations: the catalog read, per table, and when.

    Data only, never a client: each invocation brings its own session.
    """

    def __init__(
        self, reuse_s: float = CATALOG_REUSE_S, clock: Callable[[], float] = time.monotonic
    ):
        self.reuse_s = reuse_s
        self.clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, tuple[float, PriceCatalog, CatalogInUse]] = {}

    def get(self, key: str) -> tuple[PriceCatalog, CatalogInUse] | None:
        with self._lock:
            held = self._held.get(key)
            if held is None or self.clock() - held[0] >= self.reuse_s:
                return None
            return held[1], held[2]

    def put(self, key: str, catalog: PriceCatalog, in_use: CatalogInUse) -> None:
        with self._lock:
            self._held[key] = (self.clock(), catalog, in_use)

    def clear(self) -> None:
        with self._lock:
            self._held.clear()


class CatalogReader:
    """The catalog a scan prices with: the newest valid stored one, else the bundled one.

    One ``GetItem`` per cold start and then at most every :data:`CATALOG_REUSE_S`
    seconds (``cache``). A stored catalog that cannot be read or is invalid is not a
    failed scan: the bundled catalog prices it, and :class:`CatalogInUse` carries the
    problem, which the scan reports as a finding. A failed read is not remembered, so
    the next scan tries again. A stored catalog is brought up to the package's
    reference data (``adapters.catalog.rebase``); the package's catalog wins only when
    it is newer.
    """

    def __init__(
        self,
        store: CatalogStore,
        *,
        key: str = "",
        cache: CatalogCache | None = None,
        bundled: Callable[[], CatalogFile] | None = None,
    ) -> None:
        self._store = store
        self._key = key
        self._cache = cache or CatalogCache()
        self._bundled = bundled or read_catalog_file

    def read(self) -> tuple[PriceCatalog, CatalogInUse]:
        held = self._cache.get(self._key)
        if held is not None:
            return held
        catalog, in_use, keep = self._read()
        if keep:
            self._cache.put(self._key, catalog, in_use)
        return catalog, in_use

    def _read(self) -> tuple[PriceCatalog, CatalogInUse, bool]:
        bundled = self._bundled()
        try:
            stored = self._store.current()
        except _UNREADABLE as exc:
            # An AWS error's message can be a whole HTML page: one readable line instead.
            if isinstance(exc, CatalogStoreError):
                why = str(exc)
            else:
                failed = translate("dynamodb", "", "GetItem", exc)
                why = f"{failed.code}: {failed.detail}"
            return (*_bundled(bundled, f"the stored price catalog could not be read: {why}"), False)
        if stored is None:
            return (*_bundled(bundled, None), True)
        try:
            catalog = rebase(parse_catalog(stored.document, "the stored price catalog"), bundled)
        except CatalogError as exc:
            return (*_bundled(bundled, str(exc)), True)
        book = rate_book(catalog)
        if bundled.as_of > book.newest_as_of():
            # The package was upgraded since the last refresh read anything: its prices
            # are newer. But what only the store prices (a region the package lacks) is
            # kept, not unpriced until the next refresh, which starts from the stored
            # catalog rebased on the package.
            both = overlay(bundled, catalog)
            if both is None:
                return (*_bundled(bundled, None), True)
            merged = CatalogInUse(BUNDLED_AND_STORED, stored.version, rate_book(both))
            return both.to_domain(), merged, True
        return catalog.to_domain(), CatalogInUse(STORED, stored.version, book), True


def _bundled(bundled: CatalogFile, problem: str | None) -> tuple[PriceCatalog, CatalogInUse]:
    return bundled.to_domain(), CatalogInUse(BUNDLED, bundled.version, rate_book(bundled), problem)
