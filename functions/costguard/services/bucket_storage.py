"""S3 buckets tagged with a project, as an inventory source of the scan: their size per
storage class read once a (UTC) day, kept in the ledger's state, and priced every scan.

S3 publishes ``BucketSizeBytes`` once a day, so reading it at every scan would pay for the
same figure again and again. The first scan of a day in a region reads it (see
``adapters.s3_storage``: a few paged reads and one ``GetMetricData`` per 500 series) and
writes the day's figures to the ledger's state item ``s3-sizes/<region>`` (scope: the
scan's); every later scan that day reads that one item and makes no S3, tagging or
CloudWatch call. A bucket tagged (or untagged) during the day is seen the next day.

If the day's read fails, the last figures the ledger holds price the buckets, with a
finding naming their day; with none, the source fails as any other (its spend unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import BucketReading, BucketSizes, Inventory, SourceError, StateStore

STATE = "s3-sizes/{region}"


class BucketStorageSource:
    """:class:`costguard.ports.InventorySource` for project-tagged S3 buckets."""

    name = "s3"

    def __init__(
        self,
        sizes: BucketSizes,
        state: StateStore,
        *,
        scope: str,
        account: str,
        project_keys: Sequence[str],
    ) -> None:
        self._sizes = sizes
        self._state = state
        self._scope = scope
        self._account = account
        self._keys = tuple(project_keys)

    def collect(self, region: str, now: datetime) -> Inventory:
        day = now.date().isoformat()
        name = STATE.format(region=region)
        held, version = self._state.get_state(self._scope, name)
        findings: list[Finding] = []
        if held.get("day") == day:
            readings = decode(held)
        else:
            try:
                readings = self._sizes.read(region, self._keys, now)
            except SourceError as exc:
                if not held.get("day"):
                    raise
                readings = decode(held)
                findings.append(
                    Finding(
                        FindingCode.SCAN_FAILED,
                        f"{region}/s3-bucket-sizes",
                        f"{exc.operation} failed with {exc.code}; S3 buckets in {region} are "
                        f"priced at their sizes of {held['day']}",
                        Severity.WARNING,
                    )
                )
            else:
                # Another scan writing the same day first is no harm: same figures.
                self._state.put_state(self._scope, name, encode(day, readings), version)
        resources = tuple(self._resource(r, region, now) for r in readings)
        return Inventory(resources, tuple(findings))

    def _resource(self, r: BucketReading, region: str, now: datetime) -> Resource:
        # A creation date after the scan's time is not one (a clock elsewhere): the month is
        # then back-filled from its start, marked estimated, rather than never accrued.
        created = r.created_at if r.created_at is not None and r.created_at <= now else None
        return Resource(
            id=r.name,
            kind=ResourceKind.S3_BUCKET,
            region=region,
            account=self._account,
            tags=dict(r.tags),
            launched_at=created,
            name=r.name,
            stored_bytes=r.stored_bytes,
        )


def encode(day: str, readings: Sequence[BucketReading]) -> dict[str, Any]:
    return {
        "day": day,
        "buckets": [
            {
                "name": r.name,
                "tags": dict(r.tags),
                "created_at": r.created_at.isoformat() if r.created_at else None,
                "stored_bytes": {t: str(b) for t, b in r.stored_bytes},
            }
            for r in readings
        ],
    }


def decode(held: dict[str, Any]) -> list[BucketReading]:
    return [
        BucketReading(
            name=str(b["name"]),
            tags={str(k): str(v) for k, v in (b.get("tags") or {}).items()},
            created_at=datetime.fromisoformat(b["created_at"]) if b.get("created_at") else None,
            stored_bytes=tuple(sorted((str(t), int(v)) for t, v in b["stored_bytes"].items())),
        )
        for b in held.get("buckets", [])
    ]
