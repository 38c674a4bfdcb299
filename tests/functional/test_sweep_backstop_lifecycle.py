"""CostGuard's lifecycle backstop on moto: it goes with the warning, and only it goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.names import Env, Tags

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
OWNER_RULE = {
    "ID": "owner-logs",
    "Status": "Enabled",
    "Filter": {"Prefix": "logs/"},
    "Expiration": {"Days": 30},
}


def _tag(s3: Any, tags: dict[str, str]) -> None:
    s3.put_bucket_tagging(
        Bucket="scratch", Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}
    )


def _run(
    aws: Any,
    at: datetime,
    monkeypatch: pytest.MonkeyPatch,
    dry_run: bool = False,
    regions: str = "us-east-1",
) -> Any:
    from costguard.handlers import events
    from costguard.handlers.act import process
    from costguard.settings import Settings

    monkeypatch.setattr(events, "CLOCK", lambda: at)
    settings = Settings.from_env(
        {
            Env.REGIONS: regions,
            Env.TABLE_NAME: "ledger",
            Env.SCOPE: "123456789012",
            Env.DRY_RUN: "true" if dry_run else "false",
            Env.S3_SWEEP_PREFIXES: "tmp/",
        }
    )
    return process({"time": at.isoformat(), "guard": "stale-objects"}, settings, aws)


def _rules(s3: Any) -> list[dict[str, Any]]:
    try:
        return list(s3.get_bucket_lifecycle_configuration(Bucket="scratch")["Rules"])
    except s3.exceptions.ClientError:
        return []


@pytest.fixture
def swept(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A bucket with an owner's lifecycle rule, warned and swept once: CostGuard's is on."""
    from costguard_demo.plumbing import create_ledger_table
    from costguard_demo.server import backdate_object

    create_ledger_table(aws, "ledger", "us-east-1")
    s3 = aws.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="scratch")
    _tag(s3, {Tags.TTL: "48h", Tags.PROJECT: "vision"})
    s3.put_bucket_lifecycle_configuration(
        Bucket="scratch", LifecycleConfiguration={"Rules": [OWNER_RULE]}
    )
    for i, age in enumerate((72, 2, 2, 2)):
        s3.put_object(Bucket="scratch", Key=f"tmp/{i}", Body=b"x")
        backdate_object("scratch", f"tmp/{i}", NOW - timedelta(hours=age))
    assert _run(aws, NOW, monkeypatch).outcomes[0].step.value == "warned"
    assert _run(aws, NOW + timedelta(hours=25), monkeypatch).outcomes[0].step.value == "acted"
    assert [r["ID"] for r in _rules(s3)] == ["owner-logs", "costguard-ttl-0"]
    return s3


def test_removes_only_costguards_rule_when_the_bucket_is_exempted(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WHEN the owner exempts the bucket
    _tag(swept, {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"})
    assert _run(aws, NOW + timedelta(hours=26), monkeypatch).outcomes[0].step.value == "cleared"
    # THEN CostGuard's rule is gone and the owner's is kept as it was
    assert _rules(swept) == [OWNER_RULE]


def test_removes_the_old_rule_when_the_ttl_is_raised_and_installs_the_new_one_after_warning(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # WHEN the owner raises the time to live: a new warning, and the old rule goes
    _tag(swept, {Tags.TTL: "30d", Tags.PROJECT: "vision"})
    assert _run(aws, NOW + timedelta(hours=26), monkeypatch).outcomes[0].step.value == "warned"
    assert _rules(swept) == [OWNER_RULE]
    # THEN the first deletion pass after the new grace period installs the new rule
    later = NOW + timedelta(hours=26 + 25)
    assert _run(aws, later, monkeypatch).outcomes[0].step.value in {"acted", "skipped"}
    owner, ours = _rules(swept)
    assert owner == OWNER_RULE
    assert ours["ID"] == "costguard-ttl-0" and ours["Expiration"] == {"Days": 31}


def _rule_writes(aws: Any) -> list[str]:
    """Every lifecycle write the handler's S3 clients make from now on."""
    writes: list[str] = []
    for op in ("PutBucketLifecycleConfiguration", "DeleteBucketLifecycle"):
        aws.events.register(f"before-call.s3.{op}", lambda model, **_: writes.append(model.name))
    return writes


@pytest.mark.parametrize(
    ("change", "tags"),
    [
        ("dry-run switched on, nothing else", {Tags.TTL: "48h", Tags.PROJECT: "vision"}),
        ("exempted", {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"}),
        ("ttl removed", {Tags.PROJECT: "vision"}),
        ("ttl raised", {Tags.TTL: "30d", Tags.PROJECT: "vision"}),
        ("ttl malformed", {Tags.TTL: "48 hours", Tags.PROJECT: "vision"}),
    ],
)
def test_dry_run_withdraws_costguards_rule_whatever_ended_the_decision(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch, change: str, tags: dict[str, str]
) -> None:
    """Defect: after a live sweep installed costguard-ttl-0, the operator switched dryRun
    on to pause enforcement; the run reported "would withdraw" (or "would act"), yet the
    rule stayed and S3 went on expiring the bucket's objects. Dry-run never removed it:
    the executor's withdraw returns before unmark in dry-run, and its dry-run warn and
    act paths never reach the actuator (services/executor.py _withdraw, _warn, _act)."""
    # GIVEN a swept bucket (CostGuard's rule next to the owner's), and dry-run switched on
    writes = _rule_writes(aws)
    # WHEN the owner changes the bucket (or nothing) and the guard runs in dry-run
    _tag(swept, tags)
    report = _run(aws, NOW + timedelta(hours=26), monkeypatch, dry_run=True)
    assert report.outcomes[0].error is None, report.outcomes[0].detail
    # THEN CostGuard's rule is gone, the owner's kept as it was, and no object deleted
    assert _rules(swept) == [OWNER_RULE], change
    assert {o["Key"] for o in swept.list_objects_v2(Bucket="scratch")["Contents"]} == {
        "tmp/1", "tmp/2", "tmp/3"
    }  # fmt: skip
    # AND the next dry run finds nothing to withdraw and writes nothing
    _run(aws, NOW + timedelta(hours=27), monkeypatch, dry_run=True)
    assert len(writes) == 1 and _rules(swept) == [OWNER_RULE]


def test_the_rule_returns_after_a_dry_run_pause_only_with_a_pass_the_breaker_allows(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN enforcement paused with dry-run (CostGuard's rule withdrawn)
    _run(aws, NOW + timedelta(hours=26), monkeypatch, dry_run=True)
    assert _rules(swept) == [OWNER_RULE]
    # WHEN enforcement resumes
    report = _run(aws, NOW + timedelta(hours=27), monkeypatch)
    # THEN the pass is judged, and only then does the rule come back
    assert report.outcomes[0].step.value in {"acted", "skipped"}, report.outcomes[0].detail
    assert [r["ID"] for r in _rules(swept)] == ["owner-logs", "costguard-ttl-0"]


def test_a_tripped_breaker_suspends_costguards_rule_until_the_owner_confirms(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: a trip's alert says "Nothing more is deleted until you confirm", but
    CostGuard's lifecycle rule stayed on the bucket, and S3 expired the held objects at
    the next midnight anyway (services/sweep.py _trip never touched the lifecycle)."""
    from costguard_demo.server import backdate_object

    # GIVEN a swept bucket, into which ten objects past their TTL arrive at once
    for i in range(10):
        swept.put_object(Bucket="scratch", Key=f"tmp/bulk-{i}", Body=b"x")
        backdate_object("scratch", f"tmp/bulk-{i}", NOW - timedelta(hours=72))
    # WHEN the next pass trips the breaker (10 of 13)
    at = NOW + timedelta(hours=26)
    report = _run(aws, at, monkeypatch)
    assert "breaker tripped" in report.outcomes[0].detail, report.outcomes[0].detail
    # THEN CostGuard's rule is suspended (the owner's kept) and nothing is deleted
    assert _rules(swept) == [OWNER_RULE]
    assert len(swept.list_objects_v2(Bucket="scratch")["Contents"]) == 13
    # AND it stays off while the trip waits
    _run(aws, at + timedelta(hours=1), monkeypatch)
    assert _rules(swept) == [OWNER_RULE]
    # AND the owner's confirmation lets the pass go on, and the rule come back
    _tag(
        swept,
        {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.CONFIRM_DELETE: f"{at:%Y-%m-%dT%H:%MZ}"},
    )
    confirmed = _run(aws, at + timedelta(hours=2), monkeypatch)
    assert confirmed.outcomes[0].step.value == "acted", confirmed.outcomes[0].detail
    assert [r["ID"] for r in _rules(swept)] == ["owner-logs", "costguard-ttl-0"]


def test_a_bucket_whose_region_is_no_longer_guarded_loses_costguards_rule(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a swept bucket in us-east-1; WHEN the deployment stops guarding that region
    report = _run(aws, NOW + timedelta(hours=26), monkeypatch, regions="eu-west-1")
    # THEN its warning is withdrawn and CostGuard's rule goes with it (the owner's stays)
    assert [o.step.value for o in report.outcomes] == ["cleared"], report.outcomes
    assert _rules(swept) == [OWNER_RULE]


def test_an_owner_rule_whose_id_merely_starts_like_costguards_is_kept(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: CostGuard takes every lifecycle rule whose ID starts with "costguard-ttl"
    for its own (domain/sweep.py is_ours), so an owner's rule named, say,
    "costguard-ttl-archive" (a copy kept by hand, or a name chosen to sit next to ours)
    is deleted when CostGuard withdraws its backstop, although the README says it "keeps
    every rule it did not write" and writes only `costguard-ttl-<n>`."""
    # GIVEN the owner's own transition rule, named like CostGuard's, next to ours
    archive = {
        "ID": "costguard-ttl-archive",
        "Status": "Enabled",
        "Filter": {"Prefix": "archive/"},
        "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}],
    }
    ours = [r for r in _rules(swept) if r["ID"] == "costguard-ttl-0"]
    swept.put_bucket_lifecycle_configuration(
        Bucket="scratch", LifecycleConfiguration={"Rules": [OWNER_RULE, archive, *ours]}
    )
    # WHEN the owner exempts the bucket and CostGuard withdraws its rule
    _tag(swept, {Tags.TTL: "48h", Tags.PROJECT: "vision", Tags.EXEMPT: "true"})
    assert _run(aws, NOW + timedelta(hours=26), monkeypatch).outcomes[0].step.value == "cleared"
    # THEN only costguard-ttl-0 is gone: the owner's two rules are kept as they were
    assert _rules(swept) == [OWNER_RULE, archive]


def test_a_stand_down_overlapping_the_pass_that_installs_the_rule_leaves_no_rule_behind(
    aws: Any, swept: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: a live pass records backstop_on=True, then reads and writes the lifecycle.
    An overlapping run that stands the sweep down in between (dryRun switched on by a
    deploy, or the bucket exempted; neither takes the pass's claim) finds no rule yet,
    records backstop_on=False and allowed=False; the live pass then writes its rule and
    stops on the state conflict. From then on every stand-down trusts the record ("none
    there") and makes no call: the rule expires the bucket's objects for good, in dry-run
    and on an exempt bucket alike (services/sweep.py _settle, stand_down)."""
    # GIVEN enforcement paused once (CostGuard's rule off), then resumed
    _run(aws, NOW + timedelta(hours=26), monkeypatch, dry_run=True)
    assert _rules(swept) == [OWNER_RULE]
    overlapped: list[str] = []

    def dry_run_deployed_meanwhile(**_: Any) -> None:
        if not overlapped:  # the overlapping run, once, just before the live pass's PUT
            overlapped.append("dry-run")
            _run(aws, NOW + timedelta(hours=27, minutes=5), monkeypatch, dry_run=True)

    aws.events.register(
        "before-call.s3.PutBucketLifecycleConfiguration", dry_run_deployed_meanwhile
    )
    # WHEN the live pass and a dry-run stand-down overlap (the live run fails on the
    # state conflict; the invocation fails for the retry)
    with pytest.raises(Exception, match="another run changed"):
        _run(aws, NOW + timedelta(hours=27), monkeypatch)
    assert overlapped == ["dry-run"]
    # THEN the dry runs that follow take CostGuard's rule off (the owner's kept)
    for hours in (28, 29, 40):
        _run(aws, NOW + timedelta(hours=hours), monkeypatch, dry_run=True)
    assert _rules(swept) == [OWNER_RULE]


def test_withdrawing_the_rule_keeps_the_owners_transition_default_minimum_object_size() -> None:
    """Defect: PutBucketLifecycleConfiguration replaces the whole configuration, including
    its TransitionDefaultMinimumObjectSize (S3 applies all_storage_classes_128K when the
    request does not name one). CostGuard reads only the rules (adapters/s3.py lifecycle)
    and writes only rules (put_lifecycle), so an owner's varies_by_storage_class is reset:
    objects under 128 KB stop moving to Glacier under the owner's own rules. moto neither
    keeps nor returns the setting, so S3's answers are stubbed here."""
    from decimal import Decimal

    import boto3
    from botocore.stub import Stubber

    from costguard.adapters.memory import InMemoryLedger
    from costguard.adapters.s3 import S3ObjectStore
    from costguard.services.sweep import SweepService, SweepSettings, state_name

    archive = {
        "ID": "owner-archive",
        "Status": "Enabled",
        "Filter": {"Prefix": "archive/"},
        "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}],
    }
    ours = {
        "ID": "costguard-ttl-0",
        "Status": "Enabled",
        "Filter": {"Prefix": "tmp/"},
        "Expiration": {"Days": 3},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
    }
    s3 = boto3.client("s3", region_name="us-east-1")
    stub = Stubber(s3)
    # GIVEN a bucket whose owner chose varies_by_storage_class, with CostGuard's rule on
    stub.add_response(
        "get_bucket_lifecycle_configuration",
        {"Rules": [archive, ours], "TransitionDefaultMinimumObjectSize": "varies_by_storage_class"},
        {"Bucket": "scratch"},
    )
    # THEN the write that takes CostGuard's rule off names the owner's setting again
    stub.add_response(
        "put_bucket_lifecycle_configuration",
        {"TransitionDefaultMinimumObjectSize": "varies_by_storage_class"},
        {
            "Bucket": "scratch",
            "LifecycleConfiguration": {"Rules": [archive]},
            "TransitionDefaultMinimumObjectSize": "varies_by_storage_class",
        },
    )
    ledger = InMemoryLedger()
    ledger.put_state(
        "s", state_name("scratch"), {"fingerprint": "f", "phase": "ready", "backstop_on": True}, 0
    )
    service = SweepService(
        S3ObjectStore(lambda _: s3, lambda _: "us-east-1"),
        ledger,
        ledger,
        None,
        SweepSettings("s", Decimal("0.023"), dry_run=True),
    )
    # WHEN the sweep stands down (dry-run, exempt, ttl removed...)
    with stub:
        service.stand_down("scratch")
    stub.assert_no_pending_responses()
