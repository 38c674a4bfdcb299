"""The scan's cost per prediction: every endpoint variant, one batched read a region, and the
rates earlier scans recorded, so a jump after a move to a larger type is advised."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.adapters.memory import InMemoryLedger
from costguard.cli.scan_output import report_json, report_table
from costguard.domain.advice import AdviceCode
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.predictions import prediction_window
from costguard.ports import Inventory
from costguard.services.scan import ENDPOINT_RATES_STATE, ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticEndpointMetrics, StaticInventory, StaticSpotPrices

NOW = datetime(2026, 11, 20, 12, 7, tzinfo=UTC)
DAY_BEFORE = datetime(2026, 11, 19, 11, 7, tzinfo=UTC)
CREATED = datetime(2026, 11, 1, tzinfo=UTC)
MOVED = datetime(2026, 11, 19, 12, tzinfo=UTC)


def variant(itype: str, since: datetime, name: str = "chat", region: str = "us-east-1") -> Resource:
    return Resource(
        id=f"{name}/primary",
        kind=ResourceKind.SAGEMAKER_ENDPOINT,
        region=region,
        instance_type=itype,
        launched_at=CREATED,
        config_since=since,
        name=name,
        tags={"costguard:project": "serving"},
    )


def steady(per_hour: int, now: datetime) -> dict[datetime, Decimal]:
    start, end = prediction_window(now)
    out, at = {}, start
    while at < end:
        out[at] = Decimal(per_hour)
        at += timedelta(hours=1)
    return out


def scan(
    resources: list[Resource],
    metrics: StaticEndpointMetrics,
    ledger: InMemoryLedger,
    now: datetime,
    hourly: bool = False,
) -> ScanReport:
    by_region: dict[str, list[Resource]] = {}
    for r in resources:
        by_region.setdefault(r.region, []).append(r)
    return ScanService(
        sources=[
            StaticInventory("sagemaker", {k: Inventory(tuple(v)) for k, v in by_region.items()})
        ],
        spot_prices=StaticSpotPrices({}),
        catalog=fixture_catalog(),
        ledger=ledger,
        settings=ScanSettings(scope="acct", regions=("us-east-1", "us-west-2")),
        endpoint_metrics=metrics,
        hourly_predictions=hourly,
    ).run(now)


def test_a_move_to_a_larger_type_for_the_same_traffic_is_a_jump_advised_with_its_saving() -> None:
    ledger = InMemoryLedger()
    # GIVEN a scan yesterday that saw chat on ml.g5.xlarge ($1.408/h) at 1,000 invocations/h
    before = variant("ml.g5.xlarge", CREATED)
    first = scan(
        [before],
        StaticEndpointMetrics({}, served={before.key: steady(1000, DAY_BEFORE)}),
        ledger,
        DAY_BEFORE,
    )
    (cost,) = first.prediction_costs
    assert cost.usd_per_1000 == Decimal("1.408")
    # AND the scan recorded that rate in the ledger (one document)
    doc, _ = ledger.get_state("acct", ENDPOINT_RATES_STATE)
    assert doc["rates"][before.key] == [[CREATED.isoformat(), "1.408"]]
    # WHEN chat runs on ml.p3.2xlarge ($3.825/h) since yesterday noon, for the same traffic
    after = variant("ml.p3.2xlarge", MOVED)
    metrics = StaticEndpointMetrics({}, served={after.key: steady(1000, NOW)})
    report = scan([after], metrics, ledger, NOW)
    # THEN its cost per 1,000 is $3.825 now, and the 18th's was $1.408 (the recorded rate)
    (cost,) = report.prediction_costs
    assert cost.usd_per_1000 == Decimal("3.825")
    day18 = next(d for d in cost.days if d.day.day == 18)
    assert day18.usd_per_1000 == Decimal("1.408")
    # AND the rightsizing advice names the jump and saves (3.825 - 1.408) x 730 = $1,764.41
    (advice,) = report.advice
    assert advice.code is AdviceCode.PREDICTION_COST_JUMP
    assert round(advice.usd_per_month_saving, 2) == Decimal("1764.41")
    # AND one invocations read for the region, over the whole window
    (read,) = metrics.invocation_reads
    assert (read[0], len(read[1]), (read[2], read[3])) == ("us-east-1", 1, prediction_window(NOW))
    # AND the JSON carries it per variant and per day, additively
    data = report_json(report)
    (shown,) = data["cost_per_prediction"]
    assert shown["usd_per_1000_predictions"] == 3.825 and shown["status"] == "priced"
    assert shown["days"][0]["day"] == "2026-11-13" and len(shown["days"]) == 8
    resource = data["projects"][0]["resources"][0]
    assert resource["usd_per_1000_predictions"] == 3.825


def test_every_variant_of_a_region_is_read_in_one_pass_and_no_endpoint_no_read() -> None:
    ledger = InMemoryLedger()
    fleet = [variant("ml.g5.xlarge", CREATED, name=f"ep-{n}") for n in range(3)]
    # (a variant read in full with no datapoint served nothing; one absent is unknown)
    served = {fleet[0].key: steady(10, NOW), fleet[1].key: {}, fleet[2].key: {}}
    metrics = StaticEndpointMetrics({}, served=served)
    report = scan(fleet, metrics, ledger, NOW)
    assert len(metrics.invocation_reads) == 1 and len(metrics.invocation_reads[0][1]) == 3
    # the two that served nothing are "no traffic", never $0 per 1,000
    statuses = sorted(c.status.value for c in report.prediction_costs)
    assert statuses == ["no traffic", "no traffic", "priced"]
    quiet = StaticEndpointMetrics({})
    scan([], quiet, InMemoryLedger(), NOW)
    assert quiet.invocation_reads == []


def test_the_scans_text_lists_the_dearest_per_prediction_first_and_says_no_traffic() -> None:
    fleet = [variant("ml.g5.xlarge", CREATED, name=n) for n in ("busy", "slow", "idle")]
    served = {
        fleet[0].key: steady(14080, NOW),  # $1.408/h: $0.10 per 1,000
        fleet[1].key: steady(1408, NOW),  # $1.00 per 1,000
        fleet[2].key: {},
    }
    report = scan(fleet, StaticEndpointMetrics({}, served=served), InMemoryLedger(), NOW)
    text = report_table(report, colour=False)
    block = text[text.index("Cost per 1,000 predictions") :].splitlines()
    assert block[1].startswith("    slow/primary: $1.0000 per 1,000; $1.4080/h over 1,408 ")
    assert block[2].startswith("    busy/primary: $0.1000 per 1,000; ")
    assert block[3].startswith("    idle/primary: no traffic; no invocations in the last 24 h")


def test_the_scheduled_scan_reads_invocations_once_an_hour() -> None:
    """GIVEN the scheduled scan (every 15 minutes) WHEN it runs at 12:07, 12:22 and 13:07
    THEN only the first scan of each hour reads the invocations (the window ends on the
    hour: a later scan of the hour would pay for the same figures) and a retry of the same
    time reads again."""
    ledger = InMemoryLedger()
    chat = variant("ml.g5.xlarge", CREATED)
    metrics = StaticEndpointMetrics({}, served={chat.key: steady(10, NOW)})
    first = scan([chat], metrics, ledger, NOW, hourly=True)
    later = scan([chat], metrics, ledger, NOW + timedelta(minutes=15), hourly=True)
    next_hour = scan([chat], metrics, ledger, NOW + timedelta(hours=1), hourly=True)
    assert [len(r.prediction_costs) for r in (first, later, next_hour)] == [1, 0, 1]
    assert len(metrics.invocation_reads) == 2
    scan([chat], metrics, ledger, NOW + timedelta(hours=1), hourly=True)  # a retry
    assert len(metrics.invocation_reads) == 3
