"""S3 for the stale-object sweep: the object store (every S3 call the guard makes, and
the permissions they need) and the bucket listing. The policy and the actuator are
:mod:`costguard.services.stale_objects`, on the :class:`costguard.ports.ObjectStore` port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from costguard.adapters.aws import reading, tags_of
from costguard.domain.sweep import Lifecycle, Lock, StoredObject
from costguard.iam import THIS_ACCOUNT_ONLY, Permission
from costguard.ports import DeleteResult

#: The boto3 S3 client. Typed ``Any`` because the mypy_boto3_s3 stubs are not installed
#: here (``boto3-stubs[s3]`` should join the dev extras); every call goes through
#: :class:`S3ObjectStore`, whose signatures are typed.
S3Client = Any

#: Gone, or not ours to read: the bucket is skipped, never guessed about.
_MISSING = frozenset({"NoSuchBucket", "404", "NotFound"})


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _xml_form(key: str) -> str:
    """A key as an XML parser reads it back (end-of-line normalisation: CR LF, CR -> LF)."""
    return key.replace("\r\n", "\n").replace("\r", "\n")


def _unambiguous(objects: Sequence[StoredObject]) -> list[list[StoredObject]]:
    """Split ``objects`` so that no two in a group read back as the same key."""
    groups: list[tuple[set[str], list[StoredObject]]] = []
    for o in objects:
        form = _xml_form(o.key)
        for forms, group in groups:
            if form not in forms:
                forms.add(form)
                group.append(o)
                break
        else:
            groups.append(({form}, [o]))
    return [group for _, group in groups]


class S3ObjectStore:
    """One client per region; buckets are found in their region."""

    #: Every S3 call the stale-object guard makes (its policy and its actuator) is made
    #: here: what its role may do is declared with them.
    permissions: ClassVar[tuple[Permission, ...]] = (
        Permission(
            ("s3:ListAllMyBuckets", "s3:GetBucketLocation"),
            "find the buckets and their regions; ListAllMyBuckets has no resource-level "
            "permissions",
        ),
        Permission(
            (
                "s3:GetBucketTagging",
                "s3:GetBucketObjectLockConfiguration",
                "s3:GetLifecycleConfiguration",
                "s3:ListBucket",
            ),
            "read a bucket's tags (opt-in, exemption, confirmation), Object Lock and "
            "lifecycle, and list opted-in buckets; read-only, on this account's buckets",
            resources=("arn:{partition}:s3:::*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
        Permission(
            ("s3:GetObject", "s3:GetObjectRetention", "s3:GetObjectLegalHold"),
            "HEAD an expired object in a bucket with Object Lock, to keep it when it is under "
            "retention or legal hold (HeadObject needs s3:GetObject to show the lock)",
            resources=("arn:{partition}:s3:::*/*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
        Permission(
            ("s3:DeleteObject",),
            "delete expired objects of opted-in buckets (DeleteObjects is authorized per key "
            "as s3:DeleteObject). Not tag-conditioned: aws:ResourceTag works on a general "
            "purpose bucket only once its owner enables ABAC (off by default), and "
            "s3:ExistingObjectTag is not supported for deletes; so it is limited to this "
            "account's objects, never a version (no s3:DeleteObjectVersion: a versioned "
            "bucket keeps every deleted object as a noncurrent version behind a delete "
            "marker), and the opt-in is re-checked in code before and during every sweep",
            resources=("arn:{partition}:s3:::*/*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
        Permission(
            ("s3:PutLifecycleConfiguration",),
            "merge CostGuard's backstop rule into an opted-in bucket's lifecycle, and take "
            "it off again whenever the decision behind it no longer acts (dry-run included) "
            "or the breaker trips (read, keep every owner rule, write; "
            "DeleteBucketLifecycle, used only when CostGuard's rules were all of it, is "
            "authorized as s3:PutLifecycleConfiguration too); not tag-conditioned for the "
            "reason above, and limited to this account's buckets",
            resources=("arn:{partition}:s3:::*",),
            conditions=THIS_ACCOUNT_ONLY,
        ),
    )

    def __init__(self, client_for: Callable[[str], S3Client], region_of: Callable[[str], str]):
        self._client_for = client_for
        self._region_of = region_of
        self._locks: dict[str, bool] = {}

    def _s3(self, bucket: str) -> S3Client:
        return self._client_for(self._region_of(bucket))

    def list_page(
        self, bucket: str, prefix: str, start_after: str
    ) -> tuple[Sequence[StoredObject], bool]:
        kwargs: dict[str, Any] = {"Bucket": bucket, "MaxKeys": 1000}
        if prefix:
            kwargs["Prefix"] = prefix
        if start_after:
            kwargs["StartAfter"] = start_after
        with reading("s3", bucket, "ListObjectsV2"):
            page = self._s3(bucket).list_objects_v2(**kwargs)
        objects = tuple(
            StoredObject(
                key=str(o["Key"]),
                size=int(o.get("Size", 0)),
                last_modified=o["LastModified"],
                etag=str(o.get("ETag", "")),
            )
            for o in page.get("Contents", [])
        )
        return objects, bool(page.get("IsTruncated"))

    def object_lock(self, bucket: str) -> bool:
        if bucket in self._locks:
            return self._locks[bucket]
        with reading("s3", bucket, "GetObjectLockConfiguration"):
            try:
                config = self._s3(bucket).get_object_lock_configuration(Bucket=bucket)
                enabled = bool(
                    config.get("ObjectLockConfiguration", {}).get("ObjectLockEnabled") == "Enabled"
                )
            except ClientError as exc:
                if _code(exc) != "ObjectLockConfigurationNotFoundError":
                    raise
                enabled = False
        self._locks[bucket] = enabled
        return enabled

    def lock_of(self, bucket: str, obj: StoredObject) -> Lock | None:
        with reading("s3", bucket, "HeadObject"):
            try:
                head = self._s3(bucket).head_object(Bucket=bucket, Key=obj.key)
            except ClientError as exc:
                if _code(exc) in _MISSING:
                    return None
                raise
        until = head.get("ObjectLockRetainUntilDate")
        return Lock(
            retain_until=until if isinstance(until, datetime) else None,
            legal_hold=head.get("ObjectLockLegalHoldStatus") == "ON",
        )

    def delete(self, bucket: str, objects: Sequence[StoredObject]) -> DeleteResult:
        """``DeleteObjects``, each key conditional on its ETag; the reply's keys mapped back.

        The reply is XML, whose parser turns a carriage return in a key into a line feed
        (``"a\\r"`` and ``"a\\r\\n"`` both read back as ``"a\\n"``), and DeleteObjects has
        no ``EncodingType=url``. Each reply key is therefore matched by its normalised form,
        which is unique within a call: keys whose forms collide go in separate calls (rare:
        one extra call per collision). A reply key that matches no requested key is never
        counted as deleted.
        """
        if len(objects) > 1000:
            raise ValueError("DeleteObjects takes at most 1,000 keys")
        deleted: list[str] = []
        errors: dict[str, str] = {}
        for group in _unambiguous(objects):
            by_form = {_xml_form(o.key): o.key for o in group}
            ids: list[dict[str, str]] = []
            for o in group:
                ident = {"Key": o.key}
                if o.etag:
                    ident["ETag"] = o.etag  # conditional: an object rewritten since is kept
                ids.append(ident)
            with reading("s3", bucket, "DeleteObjects"):
                result = self._s3(bucket).delete_objects(
                    Bucket=bucket, Delete={"Objects": ids, "Quiet": False}
                )
            for d in result.get("Deleted", []):
                key = by_form.get(_xml_form(str(d.get("Key", ""))))
                if key is not None:
                    deleted.append(key)
            for e in result.get("Errors", []):
                key = by_form.get(_xml_form(str(e.get("Key", ""))))
                if key is not None:
                    errors[key] = str(e.get("Code", "Unknown"))
        return DeleteResult(
            deleted=tuple(k for k in dict.fromkeys(deleted) if k not in errors), errors=errors
        )

    def bucket_tags(self, bucket: str) -> dict[str, str] | None:
        with reading("s3", bucket, "GetBucketTagging"):
            try:
                result = self._s3(bucket).get_bucket_tagging(Bucket=bucket)
            except ClientError as exc:
                if _code(exc) == "NoSuchTagSet":
                    return {}
                if _code(exc) in _MISSING:
                    return None
                raise
        return tags_of(result.get("TagSet"))

    def lifecycle(self, bucket: str) -> Lifecycle:
        with reading("s3", bucket, "GetBucketLifecycleConfiguration"):
            try:
                result = self._s3(bucket).get_bucket_lifecycle_configuration(Bucket=bucket)
            except ClientError as exc:
                if _code(exc) == "NoSuchLifecycleConfiguration" or _code(exc) in _MISSING:
                    return Lifecycle()  # none, or no bucket: nothing of CostGuard's to keep
                raise
        size = result.get("TransitionDefaultMinimumObjectSize")
        return Lifecycle(tuple(result.get("Rules", [])), str(size) if size else None)

    def put_lifecycle(self, bucket: str, lifecycle: Lifecycle) -> None:
        with reading("s3", bucket, "PutBucketLifecycleConfiguration"):
            s3 = self._s3(bucket)
            if lifecycle.rules:
                extra: dict[str, Any] = {}
                if lifecycle.min_object_size is not None:  # the owner's, as read: kept
                    extra["TransitionDefaultMinimumObjectSize"] = lifecycle.min_object_size
                s3.put_bucket_lifecycle_configuration(
                    Bucket=bucket, LifecycleConfiguration={"Rules": list(lifecycle.rules)}, **extra
                )
            else:  # only CostGuard's rules were there, and none is wanted now
                s3.delete_bucket_lifecycle(Bucket=bucket)


def bucket_lister(
    client_for: Callable[[str], S3Client], home: str
) -> Callable[[], list[tuple[str, str]]]:
    """``ListBuckets`` (paginated), each bucket with its region."""

    def listing() -> list[tuple[str, str]]:
        s3 = client_for(home)
        found: list[tuple[str, str]] = []
        with reading("s3", home, "ListBuckets"):
            for page in s3.get_paginator("list_buckets").paginate():
                for b in page.get("Buckets", []):
                    name = str(b["Name"])
                    region = b.get("BucketRegion")
                    if not region:
                        location = s3.get_bucket_location(Bucket=name).get("LocationConstraint")
                        region = location or "us-east-1"
                    found.append((name, str(region)))
        return found

    return listing
