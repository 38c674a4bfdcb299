"""The S3 object store's DeleteObjects on moto: the reply's keys mapped back to the request."""

from __future__ import annotations

from typing import Any

from costguard.adapters.s3 import S3ObjectStore
from costguard.domain.sweep import StoredObject
from tests.support.clock import MIDDAY


def _store(aws: Any) -> tuple[Any, S3ObjectStore, list[int]]:
    s3 = aws.client("s3", region_name="us-east-1")
    calls: list[int] = []
    s3.meta.events.register(
        "provide-client-params.s3.DeleteObjects",
        lambda params, **_: calls.append(len(params["Delete"]["Objects"])),
    )
    s3.create_bucket(Bucket="scratch")
    return s3, S3ObjectStore(lambda region: s3, lambda bucket: "us-east-1"), calls


def _listed(s3: Any) -> list[StoredObject]:
    return [
        StoredObject(str(o["Key"]), int(o["Size"]), o["LastModified"], str(o["ETag"]))
        for o in s3.list_objects_v2(Bucket="scratch").get("Contents", [])
    ]


def test_reports_keys_with_carriage_returns_as_deleted_when_they_read_back_alike(
    aws: Any,
) -> None:
    # GIVEN keys that an XML reply reads back as one key ('a\n'), and a plain one
    s3, store, calls = _store(aws)
    keys = ["a\r", "a\r\n", "a\n", "x\r\ry", "plain"]
    for key in keys:
        s3.put_object(Bucket="scratch", Key=key, Body=b"1")
    # WHEN they are deleted in one batch
    result = store.delete("scratch", _listed(s3))
    # THEN each is reported deleted under its own key, and they really are gone
    assert sorted(result.deleted) == sorted(keys) and result.errors == {}
    assert _listed(s3) == []
    # AND the colliding keys went in separate calls (three keys read back as 'a\n')
    assert sorted(calls) == [1, 1, 3]


class _ConditionalS3:
    """DeleteObjects as S3 answers it when one key's ETag no longer matches (moto does
    not check ETags on DeleteObjects): keys read back through XML, CR as LF."""

    def __init__(self, stale: str) -> None:
        self.stale = stale

    def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        def xml(key: str) -> str:
            return key.replace("\r\n", "\n").replace("\r", "\n")

        deleted, errors = [], []
        for ident in Delete["Objects"]:
            if ident["Key"] == self.stale:
                errors.append({"Key": xml(ident["Key"]), "Code": "PreconditionFailed"})
            else:
                deleted.append({"Key": xml(ident["Key"])})
        return {"Deleted": deleted, "Errors": errors}


def test_never_reports_a_key_kept_by_its_etag_as_deleted_when_another_reads_back_alike() -> None:
    # GIVEN 'a\r' rewritten since it was listed, and 'a\n' unchanged: both read back as 'a\n'
    s3 = _ConditionalS3(stale="a\r")
    store = S3ObjectStore(lambda region: s3, lambda bucket: "us-east-1")
    listed = [StoredObject(k, 1, MIDDAY, '"e"') for k in ("a\r", "a\n", "b\r")]
    # WHEN they are deleted as listed
    result = store.delete("scratch", listed)
    # THEN only the unchanged ones count as deleted; the rewritten one is an error, kept
    assert sorted(result.deleted) == ["a\n", "b\r"]
    assert result.errors == {"a\r": "PreconditionFailed"}
