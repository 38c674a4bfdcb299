"""An in-memory S3 for the sweep's properties: honest about order, pages and locks.

Keys are listed in UTF-8 byte order (S3's order), at most 1,000 a page, after
``start_after``; a delete of a key that is gone succeeds (as S3's does); an ETag that
no longer matches is ``PreconditionFailed``. It records every call and every deletion.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from costguard.domain.sweep import Lifecycle, Lock, StoredObject
from costguard.ports import DeleteResult


@dataclass
class FakeBucket:
    objects: dict[str, StoredObject] = field(default_factory=dict)
    locks: dict[str, Lock] = field(default_factory=dict)
    object_lock: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)
    min_object_size: str | None = None


class FakeS3:
    def __init__(self, page_size: int = 1000) -> None:
        self.page_size = page_size
        self.buckets: dict[str, FakeBucket] = {}
        self.calls: Counter[str] = Counter()
        self.deleted: list[tuple[str, str]] = []
        self.fail_on: set[str] = set()  # bucket names whose calls fail

    def _b(self, bucket: str, op: str) -> FakeBucket:
        self.calls[op] += 1
        if bucket in self.fail_on:
            raise RuntimeError(f"{op} failed on {bucket}")
        return self.buckets[bucket]

    def list_page(
        self, bucket: str, prefix: str, start_after: str
    ) -> tuple[Sequence[StoredObject], bool]:
        b = self._b(bucket, "ListObjectsV2")
        after = start_after.encode("utf-8", "surrogatepass")
        keys = sorted(
            (
                k
                for k in b.objects
                if k.startswith(prefix) and k.encode("utf-8", "surrogatepass") > after
            ),
            key=lambda k: k.encode("utf-8", "surrogatepass"),
        )
        return tuple(b.objects[k] for k in keys[: self.page_size]), len(keys) > self.page_size

    def object_lock(self, bucket: str) -> bool:
        return self._b(bucket, "GetObjectLockConfiguration").object_lock

    def lock_of(self, bucket: str, obj: StoredObject) -> Lock | None:
        b = self._b(bucket, "HeadObject")
        if obj.key not in b.objects:
            return None
        return b.locks.get(obj.key, Lock())

    def delete(self, bucket: str, objects: Sequence[StoredObject]) -> DeleteResult:
        b = self._b(bucket, "DeleteObjects")
        assert len(objects) <= 1000
        deleted, errors = [], {}
        for o in objects:
            current = b.objects.get(o.key)
            if current is not None and o.etag and current.etag != o.etag:
                errors[o.key] = "PreconditionFailed"
                continue
            if current is not None:
                del b.objects[o.key]
                self.deleted.append((bucket, o.key))
            deleted.append(o.key)
        return DeleteResult(tuple(deleted), errors)

    def bucket_tags(self, bucket: str) -> dict[str, str] | None:
        self.calls["GetBucketTagging"] += 1
        b = self.buckets.get(bucket)
        return None if b is None else dict(b.tags)

    def lifecycle(self, bucket: str) -> Lifecycle:
        b = self._b(bucket, "GetBucketLifecycleConfiguration")
        return Lifecycle(tuple(dict(r) for r in b.rules), b.min_object_size if b.rules else None)

    def put_lifecycle(self, bucket: str, lifecycle: Lifecycle) -> None:
        b = self._b(bucket, "PutBucketLifecycleConfiguration")
        b.rules = [dict(r) for r in lifecycle.rules]
        # S3 applies its default to a write that names none; a delete forgets it.
        b.min_object_size = lifecycle.min_object_size if b.rules else None


class Countdown:
    """A budget that runs out after ``pages`` checks: a run interrupted at a chosen point."""

    def __init__(self, checks: int) -> None:
        self.checks = checks

    def seconds_left(self) -> float:
        self.checks -= 1
        return 1e9 if self.checks >= 0 else 0.0


class Unlimited:
    def seconds_left(self) -> float:
        return 1e9


def obj(key: str, size: int, modified: datetime, etag: str = "e") -> StoredObject:
    return StoredObject(key, size, modified, etag)
