"""EBS: list volumes and snapshots; snapshot, then delete, stale volumes; delete stale snapshots.

Every mutating call is declared next to the code that makes it, tag-conditioned in
IAM: a volume is deleted, or snapshotted, only when it carries ``costguard:project``
and is not permanently exempt; a snapshot is created only *with* CostGuard's tags
(tag-on-create, atomic with the snapshot); a snapshot is deleted only when it carries
``costguard:ttl`` and a project.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from botocore.exceptions import ClientError

from costguard.adapters import cloudtrail
from costguard.adapters.aws import ClientFor, OneLookActuator, reading, tags_of
from costguard.adapters.cloudtrail import as_utc
from costguard.domain.decisions import Decision, NotYet, Observed, Target
from costguard.domain.stale_volumes import (
    ATTACH_MARGIN,
    AVAILABLE,
    SNAPSHOT_KIND,
    VOLUME_KIND,
    SnapshotView,
    VolumeView,
    unproven,
)
from costguard.domain.tags import Tags
from costguard.iam import (
    IN_SCOPE_NOT_EXEMPT,
    Permission,
    warning_tag_permissions,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import TagTypeDef

    from costguard.ports import AttachHistory

VOLUME_ARN = "arn:{partition}:ec2:*:{account}:volume/*"
#: Snapshot ARNs carry no account: ``arn:aws:ec2:<region>::snapshot/<id>``.
SNAPSHOT_ARN = "arn:{partition}:ec2:*::snapshot/*"
#: DescribeVolumes and DescribeSnapshots return at most this many per page.
PAGE = 500
#: The tags CostGuard writes on a backup snapshot, and no other.
BACKUP_TAGS = (Tags.SOURCE_VOLUME, Tags.PROJECT, Tags.TTL, Tags.OWNER)

READS = (
    Permission(
        ("ec2:DescribeVolumes", "ec2:DescribeSnapshots"),
        "list volumes (to run the unattached clock) and this account's snapshots; EC2 "
        "Describe* calls do not support resource-level permissions",
    ),
)


def volume_view(v: Any, region: str, account: str) -> VolumeView:
    created = v.get("CreateTime")
    return VolumeView(
        id=str(v["VolumeId"]),
        region=region,
        state=str(v.get("State", "unknown")),
        tags=tags_of(v.get("Tags")),
        size_gib=int(v.get("Size", 0)),
        volume_type=str(v.get("VolumeType", "")),
        account=account,
        created_at=as_utc(created) if created else None,
        iops=int(v.get("Iops") or 0),
        throughput_mibps=int(v.get("Throughput") or 0),
    )


def snapshot_view(s: Any, region: str, account: str) -> SnapshotView:
    full = s.get("FullSnapshotSizeInBytes")
    return SnapshotView(
        id=str(s["SnapshotId"]),
        region=region,
        state=str(s.get("State", "unknown")),
        started_at=as_utc(s["StartTime"]),
        tags=tags_of(s.get("Tags")),
        volume_id=str(s.get("VolumeId", "")),
        volume_size_gib=int(s.get("VolumeSize", 0)),
        account=account,
        full_size_bytes=int(full) if full is not None else None,
    )


class EbsInventory:
    """Volumes and opted-in snapshots of one region; pages of 500."""

    def __init__(self, clients: ClientFor) -> None:
        self._clients = clients

    def volumes(self, region: str) -> list[VolumeView]:
        """Every volume, attached or not: the clock needs to see an attachment to reset.

        Not filtered by tag on the server, so that a volume whose project tag was just
        removed is still seen (and its warning withdrawn). ceil(N/500) calls.
        """
        ec2 = self._clients.ec2(region)
        found: list[VolumeView] = []
        with reading("ec2", region, "DescribeVolumes"):
            for page in ec2.get_paginator("describe_volumes").paginate(
                PaginationConfig={"PageSize": PAGE}
            ):
                found.extend(
                    volume_view(v, region, self._clients.account) for v in page.get("Volumes", [])
                )
        return found

    def snapshots(self, region: str) -> list[SnapshotView]:
        """This account's snapshots tagged ``costguard:ttl``, and those carrying a warning
        (``costguard:action-after``): a warned snapshot whose time to live was removed
        since is still seen, so that its warning is withdrawn.

        Filtered on the server, one pass per tag key (ceil(S/500) calls, plus usually one
        for the few warned): two keys in one ``tag-key`` filter would mean either on AWS,
        but moto 5.2.5 matches them as a set, so the tests would not see the same thing.
        """
        ec2 = self._clients.ec2(region)
        found: dict[str, SnapshotView] = {}
        with reading("ec2", region, "DescribeSnapshots"):
            for key in (Tags.TTL, Tags.ACTION_AFTER):
                for page in ec2.get_paginator("describe_snapshots").paginate(
                    OwnerIds=["self"],
                    Filters=[{"Name": "tag-key", "Values": [key]}],
                    PaginationConfig={"PageSize": PAGE},
                ):
                    for s in page.get("Snapshots", []):
                        view = snapshot_view(s, region, self._clients.account)
                        found.setdefault(view.id, view)
        return list(found.values())


class _Tagging(OneLookActuator):
    """Warning tags (``costguard:action-after``) on volumes and snapshots."""

    def _ec2(self, region: str) -> EC2Client:
        return self._clients.ec2(region)

    def mark(self, target: Target, key: str, value: str) -> None:
        with reading("ec2", target.region, "CreateTags"):
            self._ec2(target.region).create_tags(
                Resources=[target.id], Tags=[{"Key": key, "Value": value}]
            )

    def unmark(self, target: Target, key: str) -> None:
        try:
            with reading("ec2", target.region, "DeleteTags"):
                self._ec2(target.region).delete_tags(Resources=[target.id], Tags=[{"Key": key}])
        except Exception as exc:
            # Deleted with its tags (the action itself): nothing left to withdraw.
            if not _missing(exc.__cause__ or exc, *_NOT_FOUND):
                raise


_NOT_FOUND = ("InvalidVolume.NotFound", "InvalidSnapshot.NotFound")


def _missing(exc: BaseException, *codes: str) -> bool:
    return isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in codes


class EbsVolumeActuator(_Tagging):
    """Snapshot (by default) and then delete an unattached volume, across runs.

    ``apply`` is idempotent: it first looks for CostGuard's snapshots of this volume
    (tag ``costguard:source-volume``, the same ``VolumeId``, started in this unattached
    spell); with none it creates one and waits; while it is pending it waits; if it
    failed it refuses to delete. Once the newest has completed, the volume is deleted
    only if CloudTrail shows no ``AttachVolume`` of it since that snapshot began (the
    snapshot and the delete are runs apart: an owner may attach, write and detach in
    between); otherwise it is snapshotted again (see
    :mod:`costguard.domain.stale_volumes`).
    """

    kind = VOLUME_KIND
    permissions: ClassVar[tuple[Permission, ...]] = (
        *READS,
        Permission(
            ("ec2:DeleteVolume",),
            "delete an unattached volume past its time to live, after its owner was warned "
            "(and after its backup snapshot completed); only volumes tagged with a project "
            "and not permanently exempt",
            resources=(VOLUME_ARN,),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        Permission(
            ("ec2:CreateSnapshot",),
            "back up a stale volume before deleting it: only volumes tagged with a project "
            "and not permanently exempt",
            resources=(VOLUME_ARN,),
            conditions=IN_SCOPE_NOT_EXEMPT,
        ),
        Permission(
            ("ec2:CreateSnapshot",),
            "the backup snapshot itself: only created with CostGuard's tags (source volume, "
            "project, time to live), so that it is attributable and expires",
            resources=(SNAPSHOT_ARN,),
            conditions={
                "Null": {
                    f"aws:RequestTag/{Tags.PROJECT}": "false",
                    f"aws:RequestTag/{Tags.SOURCE_VOLUME}": "false",
                    f"aws:RequestTag/{Tags.TTL}": "false",
                },
            },
        ),
        Permission(
            ("ec2:CreateTags",),
            "tag the backup snapshot as it is created (tag-on-create), with CostGuard's keys "
            "only; never an existing snapshot",
            resources=(SNAPSHOT_ARN,),
            conditions={
                "StringEquals": {"ec2:CreateAction": "CreateSnapshot"},
                "Null": {f"aws:RequestTag/{Tags.PROJECT}": "false"},
                "ForAllValues:StringEquals": {"aws:TagKeys": list(BACKUP_TAGS)},
            },
        ),
        *warning_tag_permissions("ec2", "volumes", (VOLUME_ARN,)),
        *cloudtrail.READS,
    )

    def __init__(self, clients: ClientFor, history: AttachHistory | None = None) -> None:
        super().__init__(clients)
        self._history = history or cloudtrail.CloudTrailAttachHistory(clients)

    def _inspect_one(self, target: Target) -> Observed | None:
        try:
            with reading("ec2", target.region, "DescribeVolumes"):
                found = self._ec2(target.region).describe_volumes(VolumeIds=[target.id])
        except Exception as exc:
            if _missing(exc.__cause__ or exc, "InvalidVolume.NotFound"):
                return None
            raise
        for v in found.get("Volumes", []):
            state = str(v.get("State", "unknown"))
            # Attached (in-use), or on its way out: nothing for CostGuard to do.
            return Observed(state, tags_of(v.get("Tags")), settled=state != AVAILABLE)
        return None

    def _backups(self, target: Target) -> list[Any]:
        with reading("ec2", target.region, "DescribeSnapshots"):
            pages = (
                self._ec2(target.region)
                .get_paginator("describe_snapshots")
                .paginate(
                    OwnerIds=["self"],
                    Filters=[
                        {"Name": f"tag:{Tags.SOURCE_VOLUME}", "Values": [target.id]},
                        {"Name": "volume-id", "Values": [target.id]},
                    ],
                )
            )
            return [s for page in pages for s in page.get("Snapshots", [])]

    def apply(self, decision: Decision) -> str | NotYet:
        t = decision.target
        if decision.params.get("snapshot", "true") != "false":
            waiting = self._backed_up(decision)
            if isinstance(waiting, NotYet):
                return waiting
            backup = (
                f" after its snapshot {waiting} completed, with no attachment since it began "
                "(CloudTrail)"
            )
        else:
            backup = " (no snapshot: snapshot-before-delete is off)"
        with reading("ec2", t.region, "DeleteVolume"):
            self._ec2(t.region).delete_volume(VolumeId=t.id)
        return f"deleted {t.id}{backup}"

    def _backed_up(self, decision: Decision) -> str | NotYet:
        """The id of a completed backup that holds everything the volume holds, or what
        is being waited for."""
        t = decision.target
        since = as_utc(decision.params["first_seen"]) if "first_seen" in decision.params else None
        mine = sorted(
            (
                s
                for s in self._backups(t)
                # A snapshot from before this unattached spell may miss what was written since.
                if s.get("VolumeId") == t.id and (since is None or as_utc(s["StartTime"]) >= since)
            ),
            key=lambda s: as_utc(s["StartTime"]),
            reverse=True,
        )
        completed = [s for s in mine if s.get("State") == "completed"]
        pending = [s for s in mine if s.get("State") == "pending"]
        if completed:
            newest = completed[0]
            began = as_utc(newest["StartTime"])
            # One lookup per region and run serves every volume asked about in it.
            record = self._history.attachments(
                t.region, t.id, began - ATTACH_MARGIN, decision.decided_at
            )
            why = unproven(began, record)
            if why is None:
                return str(newest["SnapshotId"])
            if not pending:
                return self._snapshot(
                    decision, f"{why}; snapshot {newest['SnapshotId']} may miss it"
                )
        if pending:
            s = pending[0]
            return NotYet(
                f"waiting for snapshot {s['SnapshotId']} of {t.id} ({s.get('Progress') or '0%'})"
            )
        if mine:
            s = mine[0]
            raise RuntimeError(
                f"snapshot {s['SnapshotId']} of {t.id} is {s.get('State')}: the volume is kept; "
                "delete that snapshot to let CostGuard take another"
            )
        return self._snapshot(decision, "")

    def _snapshot(self, decision: Decision, again: str) -> NotYet:
        """Start a backup of the volume; ``again`` says why an earlier one does not do."""
        t = decision.target
        project = (t.tags_seen or {}).get(Tags.PROJECT) or t.project or ""
        tags: list[TagTypeDef] = [
            {"Key": Tags.SOURCE_VOLUME, "Value": t.id},
            {"Key": Tags.PROJECT, "Value": project},
            {"Key": Tags.TTL, "Value": decision.params.get("snapshot_ttl", "30d")},
        ]
        if t.owners:
            tags.append({"Key": Tags.OWNER, "Value": ", ".join(t.owners)[:256]})
        with reading("ec2", t.region, "CreateSnapshot"):
            created = self._ec2(t.region).create_snapshot(
                VolumeId=t.id,
                Description=f"CostGuard backup of {t.id} before deleting it"[:255],
                TagSpecifications=[{"ResourceType": "snapshot", "Tags": tags}],
            )
        detail = (
            f"snapshot {created['SnapshotId']} of {t.id} started; the volume is deleted once "
            "it completes, if it is not attached meanwhile"
        )
        return NotYet(f"{again}: snapshot again. {detail}" if again else detail, started=True)


class EbsSnapshotActuator(_Tagging):
    """Delete a snapshot past its ``costguard:ttl``."""

    kind = SNAPSHOT_KIND
    permissions: ClassVar[tuple[Permission, ...]] = (
        *READS,
        Permission(
            ("ec2:DeleteSnapshot",),
            "delete a snapshot past its costguard:ttl, after its owner was warned; only "
            "snapshots tagged with a time to live and a project, not permanently exempt",
            resources=(SNAPSHOT_ARN,),
            conditions={
                "Null": {
                    f"aws:ResourceTag/{Tags.PROJECT}": "false",
                    f"aws:ResourceTag/{Tags.TTL}": "false",
                },
                "StringNotEqualsIgnoreCase": {
                    f"aws:ResourceTag/{Tags.EXEMPT}": ["true", "yes"],
                },
            },
        ),
        *warning_tag_permissions("ec2", "snapshots", (SNAPSHOT_ARN,)),
    )

    def _inspect_one(self, target: Target) -> Observed | None:
        try:
            with reading("ec2", target.region, "DescribeSnapshots"):
                found = self._ec2(target.region).describe_snapshots(SnapshotIds=[target.id])
        except Exception as exc:
            if _missing(exc.__cause__ or exc, "InvalidSnapshot.NotFound"):
                return None
            raise
        for s in found.get("Snapshots", []):
            state = str(s.get("State", "unknown"))
            return Observed(state, tags_of(s.get("Tags")), settled=False)
        return None

    def apply(self, decision: Decision) -> str | NotYet:
        t = decision.target
        try:
            with reading("ec2", t.region, "DeleteSnapshot"):
                self._ec2(t.region).delete_snapshot(SnapshotId=t.id)
        except Exception as exc:
            if _missing(exc.__cause__ or exc, "InvalidSnapshot.InUse"):
                # Backs a registered AMI: kept, reported every run, never a failed run.
                return NotYet(f"{t.id} is in use by an AMI; kept until the image is deregistered")
            raise
        return f"deleted snapshot {t.id}"
