"""DynamoDB items as plain Python values, and the one conditional write.

Items go in and come out as plain values through boto3's ``TypeSerializer`` and
``TypeDeserializer``: ``str`` is ``S``, ``int``/``Decimal`` is ``N`` (read back as
``Decimal``), ``bytes`` is ``B`` (read back as ``bytes``), ``dict`` is ``M``, ``list`` is
``L``, a ``set`` of strings is ``SS``, ``None`` is ``NULL``. An empty string stays an
empty string. A number must fit DynamoDB's 38 digits, as the table requires anyway.

A conditional write that loses its condition is not an error here: it is an answer
(``None`` from :func:`unless_refused`, ``False`` from :func:`written`), because a lost
race is how every claim, lease and compare-and-set in CostGuard says "someone else got
there first".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

T = TypeVar("T")


class _Deserializer(TypeDeserializer):
    def _deserialize_b(self, value: bytes) -> bytes:  # bytes, not boto3's Binary wrapper
        return value


_TO, _FROM = TypeSerializer(), _Deserializer()


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """Plain values as DynamoDB attribute values."""
    return {k: _TO.serialize(v) for k, v in values.items()}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values as plain values."""
    return {k: _FROM.deserialize(v) for k, v in item.items()}


def code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def unless_refused(write: Callable[[], T]) -> T | None:
    """The answer of a conditional write, or None when its condition refused it (for a
    transaction: when a condition cancelled it). Any other error is raised."""
    try:
        return write()
    except ClientError as exc:
        if code(exc) == "ConditionalCheckFailedException":
            return None
        reasons = exc.response.get("CancellationReasons") or []  # type: ignore[typeddict-item]
        if code(exc) == "TransactionCanceledException" and any(
            r.get("Code") == "ConditionalCheckFailed" for r in reasons
        ):
            return None
        raise


def written(write: Callable[[], object]) -> bool:
    """Whether a conditional write went through (False: its condition refused it)."""
    return unless_refused(write) is not None


def pk_sk(pk: str, sk: str) -> dict[str, Any]:
    """The key of an item of a ``pk``/``sk`` table."""
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def expression(
    condition: str | None = None,
    names: Mapping[str, str] | None = None,
    values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A request's condition and its names and (plain) values, as keyword arguments."""
    out: dict[str, Any] = {}
    if condition is not None:
        out["ConditionExpression"] = condition
    if names:
        out["ExpressionAttributeNames"] = dict(names)
    if values:
        out["ExpressionAttributeValues"] = to_item(values)
    return out


def items_of(pages: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """The items of a paginated ``Query``, as plain values."""
    for page in pages:
        for item in page.get("Items", []):
            yield from_item(item)
