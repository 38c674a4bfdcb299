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
import zlib
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from costguard.adapters.dynamodb import ITEM_BUDGET_BYTES, parse_stamp, stamp
from costguard.ports import StoredCatalog

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

PARTITION = "CATALOG"
CURRENT = "CURRENT"


class CatalogStoreError(Exception):
    """The stored catalog cannot be read or written (corrupt item, oversized document)."""


def version_key(version: int) -> str:
    return f"VERSION#{version:010d}"


def encode_document(document: Mapping[str, Any]) -> bytes:
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return zlib.compress(text.encode("utf-8"), 9)


def decode_document(blob: bytes) -> dict[str, Any]:
    try:
        document = json.loads(zlib.decompress(blob).decode("utf-8"))
    except (zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogStoreError(f"the stored price catalog is not readable: {exc}") from None
    if not isinstance(document, dict):
        raise CatalogStoreError("the stored price catalog is not a JSON object")
    return document


class DynamoDbCatalogStore:
    """:class:`costguard.ports.CatalogStore` on the ledger table."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self._ddb = client
        self._table = table_name

    def _read(self, sk: str) -> StoredCatalog | None:
        # Eventually consistent: half the read units, and a catalog written once a week
        # does not need the newest second.
        item = self._ddb.get_item(
            TableName=self._table, Key={"pk": {"S": PARTITION}, "sk": {"S": sk}}
        ).get("Item")
        if item is None:
            return None
        try:
            version = int(item["version"]["N"])
            stored_at = parse_stamp(item["stored_at"]["S"])
            blob = item["data"]["B"]
        except (KeyError, ValueError) as exc:
            raise CatalogStoreError(f"the stored price catalog item {sk} is malformed: {exc}") from None
        return StoredCatalog(version, stored_at, decode_document(blob))

    def current(self) -> StoredCatalog | None:
        return self._read(CURRENT)

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
            "version": {"N": str(version)},
            "stored_at": {"S": stamp(at)},
            "as_of": {"S": str(document.get("as_of", ""))},
            "data": {"B": blob},
        }
        if expected_version == 0:
            condition, values = "attribute_not_exists(pk)", None
        else:
            condition, values = "#v = :expected", {":expected": {"N": str(expected_version)}}
        current: dict[str, Any] = {
            "TableName": self._table,
            "Item": {"pk": {"S": PARTITION}, "sk": {"S": CURRENT}, **attrs},
            "ConditionExpression": condition,
        }
        if values is not None:
            current["ExpressionAttributeNames"] = {"#v": "version"}
            current["ExpressionAttributeValues"] = values
        items = [
            {"Put": current},
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {"pk": {"S": PARTITION}, "sk": {"S": version_key(version)}, **attrs},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        try:
            self._ddb.transact_write_items(
                TransactItems=cast("list[TransactWriteItemTypeDef]", items)
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                reasons = exc.response.get("CancellationReasons") or []
                if any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                    return None
            raise
        return version
