"""A whole scan on the DynamoDB ledger (moto) over resources whose tags are arbitrary:
it never fails, every bad tag is a finding, and every project survives the round trip."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from costguard.domain.models import Resource, ResourceKind
from costguard.domain.tags import TagKeys, normalise_project, read_tags
from costguard.ports import CommitOutcome, Inventory
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.clock import MIDDAY
from tests.support.fakes import StaticInventory, StaticSpotPrices
from tests.support.profiles import examples
from tests.support.tag_strategies import tag_sets

REGION = "us-east-1"
KEYS = TagKeys()

fleets = st.lists(tag_sets, min_size=1, max_size=4)


@pytest.fixture
def ddb_ledger() -> Iterator[object]:
    import boto3
    from moto import mock_aws

    from costguard.adapters.dynamodb import DynamoDbLedger
    from tests.functional.test_ledger_contract import make_table

    with mock_aws():
        session = boto3.Session()
        make_table(session)
        yield DynamoDbLedger(session.client("dynamodb", region_name=REGION), "ledger")


def fleet_of(tag_sets: list[dict[str, str]]) -> tuple[Resource, ...]:
    return tuple(
        Resource(
            id=f"i-{n:017x}",
            kind=ResourceKind.EC2_INSTANCE,
            region=REGION,
            instance_type="g5.xlarge",
            availability_zone=f"{REGION}a",
            launched_at=MIDDAY - timedelta(hours=3),
            tags=tags,
        )
        for n, tags in enumerate(tag_sets)
    )


@pytest.mark.hypothesis  # its @given is inside: `make property` selects it by this mark
def test_a_scan_over_arbitrary_tags_completes_and_reports_every_bad_tag(
    ddb_ledger: object,
) -> None:
    scopes = itertools.count()

    # Each example is a whole scan onto DynamoDB (about half a second): `make test` runs 10
    # generated ones and the 4 below, `make property` 200 (tests/support/profiles.py).
    @settings(
        max_examples=examples(10, 200),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(fleets)
    @example([{"costguard:project": "計算" * 128, "costguard:exempt": "9999-12-31"}])
    @example([{"costguard:project": "\U0001f680" * 256}])
    @example([{"Project": "vision\u200b", "costguard:budget": "0.001"}, {"Project": "vision"}])
    @example(
        [{"costguard:owner": "a@b.io\r\nURGENT", "costguard:exempt": "0001-01-01T00:00+01:00"}]
    )
    def scan(tag_sets: list[dict[str, str]]) -> None:
        # GIVEN resources with arbitrary tags, each example in its own scope of one table
        resources = fleet_of(tag_sets)
        scope = f"acct-{next(scopes)}"
        service = ScanService(
            sources=[StaticInventory("ec2", {REGION: Inventory(resources)})],
            spot_prices=StaticSpotPrices({}),
            catalog=fixture_catalog(),
            ledger=ddb_ledger,  # type: ignore[arg-type]
            settings=ScanSettings(scope=scope, regions=(REGION,), max_workers=1),
        )
        # WHEN they are scanned onto the DynamoDB ledger, THEN the scan completes
        report = service.run(MIDDAY)
        assert report.ledger is CommitOutcome.APPLIED

        # and every tag problem is a finding of the report, and of the ledger's day
        stored = {(f.code, f.resource) for f in ddb_ledger.findings(scope, "2026-11-20")}  # type: ignore[attr-defined]
        reported = {(f.code, f.resource) for f in report.findings}
        expected_projects = set()
        for res in resources:
            parsed = read_tags(res.key, res.tags, KEYS)
            for finding in parsed.findings:
                assert (finding.code, finding.resource) in reported
                assert (finding.code, finding.resource) in stored
            if parsed.project is not None:
                expected_projects.add(parsed.project)
        # and each valid project was accrued under its name, read back from DynamoDB
        assert {p.project for p in report.projects} == expected_projects
        totals = ddb_ledger.month_totals(scope, "2026-11")  # type: ignore[attr-defined]
        for project in expected_projects:
            assert normalise_project(project) == project
            assert totals[project].usd > 0

    scan()
