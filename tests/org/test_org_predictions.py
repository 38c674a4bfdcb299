"""Organization mode carries each endpoint variant's cost per 1,000 predictions from the
member slices to the roll-up: the figures each member's scan computed, keyed by account and
region, through the slice's done item (both slice books), never re-derived and never $0.

The slices are scanned by the real :class:`~costguard.services.scan.ScanService` over
in-memory inventories and invocation sums, into their own ledger scopes of the hub's ledger,
then marked done and aggregated by the real :class:`~costguard.services.org.SliceWork` and
:class:`~costguard.services.org.Aggregation`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.slices import DynamoDbSliceBook, InMemorySliceBook
from costguard.domain.advice import AdviceCode
from costguard.domain.alerts import AlertKind
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.org import MAX_PREDICTIONS, Slice, slice_scope
from costguard.domain.predictions import ASYNC_UNCOUNTED, CostStatus
from costguard.ports import Inventory
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.org import Aggregation, OrgReport, OrgSettings, SliceWork, alert_after
from costguard.services.scan import ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.endpoints import steady_invocations
from tests.support.fakes import (
    RecordingNotifier,
    StaticEndpointMetrics,
    StaticInventory,
    StaticSpotPrices,
)

HUB = "999999999999"
A, B = "111111111111", "222222222222"
SA, SB = Slice(A, "us-east-1"), Slice(B, "us-west-2")
#: The scheduled time, and the consumer's clock a few minutes after it.
TICK = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
NOW = TICK + timedelta(minutes=3)
#: An earlier scan of account A, the day before (it recorded chat's rate then).
DAY_BEFORE = datetime(2026, 11, 19, 11, 7, tzinfo=UTC)
CREATED = datetime(2026, 11, 1, tzinfo=UTC)


def endpoint(
    s: Slice,
    name: str,
    itype: str,
    *,
    count: int = 1,
    since: datetime = CREATED,
    asynchronous: bool = False,
) -> Resource:
    return Resource(
        id=f"{name}/primary",
        kind=ResourceKind.SAGEMAKER_ENDPOINT,
        region=s.region,
        account=s.account,
        instance_type=itype,
        count=count,
        launched_at=CREATED,
        config_since=since,
        asynchronous=asynchronous,
        name=name,
        tags={"costguard:project": "serving"},
    )


class Members:
    """Each member account-region's fleet and invocations, scanned as the consumer scans a
    slice: into the slice's own scope of the hub's ledger."""

    def __init__(self, ledger: InMemoryLedger) -> None:
        self.ledger = ledger
        self.fleet: dict[Slice, list[Resource]] = {}
        self.served: dict[str, Mapping[datetime, Decimal]] = {}

    def scan(self, s: Slice) -> ScanService:
        return ScanService(
            sources=[
                StaticInventory("sagemaker", {s.region: Inventory(tuple(self.fleet.get(s, [])))})
            ],
            spot_prices=StaticSpotPrices({}),
            catalog=fixture_catalog(),
            ledger=self.ledger,
            settings=ScanSettings(
                scope=slice_scope(HUB, s), regions=(s.region,), account=s.account
            ),
            endpoint_metrics=StaticEndpointMetrics({}, served=self.served),
        )


@pytest.fixture(params=["memory", "dynamodb"])
def book(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Both slice books: the figures go through the done item and back."""
    if request.param == "memory":
        yield InMemorySliceBook()
        return
    import boto3
    from moto import mock_aws

    from costguard_demo.plumbing import create_ledger_table

    with mock_aws():
        session = boto3.Session()
        create_ledger_table(session, "ledger", "us-east-1")
        yield DynamoDbSliceBook(session.client("dynamodb", region_name="us-east-1"), "ledger", HUB)


def aggregate(
    book: Any,
    members: Members,
    *,
    notifier: RecordingNotifier | None = None,
    done_by_older_version: tuple[Slice, ...] = (),
) -> OrgReport:
    """Plan TICK for SA and SB, run each slice's scan and mark (a slice "done by an older
    version" is marked as one: no cost per prediction in its done item), return the roll-up."""
    after = None
    if notifier is not None:
        after = alert_after(AlertService(members.ledger, notifier, AlertSettings(scope=HUB)))
    aggregation = Aggregation(book, members.ledger, OrgSettings(scope=HUB), after=after)
    work = SliceWork(
        book, members.scan, aggregation, (), keeps_advice=lambda _tick: notifier is not None
    )
    book.plan(TICK, [SA, SB], TICK + timedelta(minutes=10))
    report = None
    for s in (SA, SB):
        if s in done_by_older_version:
            members.scan(s).run(TICK)
            book.mark_done(TICK, s)  # what an older consumer wrote: no predictions field
            continue
        report = work.run(TICK, s, NOW).aggregated
    assert report is not None
    return report


def test_two_member_accounts_endpoints_carry_their_cost_per_1000_into_the_roll_up(
    book: Any,
) -> None:
    # GIVEN account A's chat on one ml.g5.xlarge ($1.408/h) serving 1,408 invocations an
    # hour, and account B's ranker on two ml.g5.xlarge ($2.816/h) serving 5,632 an hour
    members = Members(InMemoryLedger())
    chat = endpoint(SA, "chat", "ml.g5.xlarge")
    ranker = endpoint(SB, "ranker", "ml.g5.xlarge", count=2)
    members.fleet = {SA: [chat], SB: [ranker]}
    members.served = {
        chat.key: steady_invocations(1408, TICK),
        ranker.key: steady_invocations(5632, TICK),
    }
    # WHEN both slices come in and the time is aggregated
    report = aggregate(book, members)
    # THEN the roll-up holds both variants, each keyed by its account and region
    costs = {c.key: c for c in report.prediction_costs}
    assert list(costs) == [
        f"{A}/us-east-1/sagemaker-endpoint/chat/primary",
        f"{B}/us-west-2/sagemaker-endpoint/ranker/primary",
    ]
    # AND their $ per 1,000 predictions are the members': 1.408 / 1,408 x 1,000 = $1.00,
    # and 2.816 / 5,632 x 1,000 = $0.50
    a, b = costs[chat.key], costs[ranker.key]
    assert (a.status, a.usd_per_1000, a.usd_per_hour) == (
        CostStatus.PRICED,
        Decimal("1.00"),
        Decimal("1.408"),
    )
    assert (b.status, b.usd_per_1000, b.count) == (CostStatus.PRICED, Decimal("0.50"), 2)
    assert b.invocations_per_hour == Decimal(5632)
    # AND each UTC day came through too: the 19th cost 24 x $2.816 = $67.584 for
    # 24 x 5,632 = 135,168 invocations, $0.50 per 1,000
    day19 = next(d for d in b.days if d.day.day == 19)
    assert (day19.hours, day19.usd, day19.invocations) == (24, Decimal("67.584"), 135168)
    assert day19.usd_per_1000 == Decimal("0.50")
    assert len(b.days) == 8  # 7 whole days, then today so far
    # AND every slice reported its figures, none left out
    assert report.predictions_unreported == () and report.predictions_cut == 0


def test_a_jump_in_one_member_account_is_in_the_org_advice_digest_naming_that_account(
    book: Any,
) -> None:
    # GIVEN account A's chat was scanned yesterday on ml.g5.xlarge ($1.408/h) at 1,000
    # invocations an hour (its slice recorded that rate), and moved to ml.p3.2xlarge
    # ($3.825/h) at yesterday noon for the same traffic; account B's ranker is steady
    members = Members(InMemoryLedger())
    before = endpoint(SA, "chat", "ml.g5.xlarge")
    members.fleet = {SA: [before]}
    members.served = {before.key: steady_invocations(1000, DAY_BEFORE)}
    members.scan(SA).run(DAY_BEFORE)
    chat = endpoint(SA, "chat", "ml.p3.2xlarge", since=datetime(2026, 11, 19, 12, tzinfo=UTC))
    ranker = endpoint(SB, "ranker", "ml.g5.xlarge")
    members.fleet = {SA: [chat], SB: [ranker]}
    members.served = {
        chat.key: steady_invocations(1000, TICK),
        ranker.key: steady_invocations(1408, TICK),
    }
    # WHEN the time (of the digest hour) is aggregated, with the hub's alerts
    notifier = RecordingNotifier([])
    report = aggregate(book, members, notifier=notifier)
    # THEN A's figure in the roll-up is the jumped one, $3.825 per 1,000
    costs = {c.key: c for c in report.prediction_costs}
    assert costs[chat.key].usd_per_1000 == Decimal("3.825")
    assert costs[ranker.key].usd_per_1000 == Decimal("1.00")
    # AND the Organization's advice digest for project serving names the jump with A's
    # account: (3.825 - 1.408) x 730 = $1,764.41 a month
    (digest,) = [a for a in notifier.published if a.kind is AlertKind.ADVICE_DIGEST]
    assert digest.project == "serving"
    (line,) = [d for d in digest.details if AdviceCode.PREDICTION_COST_JUMP.value in d]
    assert line.startswith("$1,764.41/month")
    assert f"{A}/us-east-1/sagemaker-endpoint/chat/primary" in line
    assert B not in " ".join(digest.details)


def test_no_traffic_and_unknown_survive_the_trip_never_as_zero(book: Any) -> None:
    # GIVEN account A's chat served no invocation in the last day (it still bills
    # $1.408/h), and account B's batch is asynchronous (no Invocations published)
    members = Members(InMemoryLedger())
    chat = endpoint(SA, "chat", "ml.g5.xlarge")
    batch = endpoint(SB, "batch", "ml.g5.xlarge", asynchronous=True)
    members.fleet = {SA: [chat], SB: [batch]}
    members.served = {chat.key: {}}
    # WHEN the time is aggregated
    report = aggregate(book, members)
    costs = {c.key: c for c in report.prediction_costs}
    # THEN chat is "no traffic", with no figure and its reason, not $0 per 1,000
    idle = costs[chat.key]
    assert (idle.status, idle.usd_per_1000) == (CostStatus.NO_TRAFFIC, None)
    assert idle.invocations_per_hour == 0 and idle.usd_per_hour == Decimal("1.408")
    assert "no invocations in the last 24 h" in idle.reason
    assert all(d.status is CostStatus.NO_TRAFFIC and d.usd_per_1000 is None for d in idle.days)
    # AND batch is "unknown" with the asynchronous reason, its invocations unknown, not 0
    unknown = costs[batch.key]
    assert (unknown.status, unknown.usd_per_1000, unknown.invocations_per_hour) == (
        CostStatus.UNKNOWN,
        None,
        None,
    )
    assert unknown.reason == ASYNC_UNCOUNTED


def test_a_slice_done_by_an_older_version_is_not_reported_not_zero(book: Any) -> None:
    # GIVEN account A's chat serving traffic, but A's slice marked done by a consumer of
    # an older version (its done item has no cost per prediction); B scanned by this one
    members = Members(InMemoryLedger())
    chat = endpoint(SA, "chat", "ml.g5.xlarge")
    ranker = endpoint(SB, "ranker", "ml.g5.xlarge")
    members.fleet = {SA: [chat], SB: [ranker]}
    members.served = {
        chat.key: steady_invocations(1408, TICK),
        ranker.key: steady_invocations(1408, TICK),
    }
    # WHEN the time is aggregated
    report = aggregate(book, members, done_by_older_version=(SA,))
    # THEN A is named as not reporting its cost per prediction, and only B's are rolled up
    assert report.predictions_unreported == (SA,)
    assert [c.key for c in report.prediction_costs] == [ranker.key]
    # AND A's slice is still done and counted: only its endpoints' figures are unknown
    assert SA not in report.missing


def test_a_slice_without_endpoints_reports_none_rather_than_not_reported(book: Any) -> None:
    # GIVEN neither account runs an endpoint
    members = Members(InMemoryLedger())
    # WHEN the time is aggregated
    report = aggregate(book, members)
    # THEN both reported "no variant": nothing is unreported
    assert report.prediction_costs == () and report.predictions_unreported == ()


def test_a_slice_with_more_variants_than_a_done_item_keeps_counts_the_rest(book: Any) -> None:
    # GIVEN account A runs MAX_PREDICTIONS + 3 endpoints, the last three on two instances
    members = Members(InMemoryLedger())
    fleet = [endpoint(SA, f"e{n:03d}", "ml.g5.xlarge") for n in range(MAX_PREDICTIONS)]
    fleet += [endpoint(SA, f"big{n}", "ml.g5.xlarge", count=2) for n in range(3)]
    members.fleet = {SA: fleet}
    members.served = {r.key: steady_invocations(1408, TICK) for r in fleet}
    # WHEN the time is aggregated
    report = aggregate(book, members)
    # THEN the done item kept MAX_PREDICTIONS, the dearest an hour first (the three on
    # two instances are all in), and the roll-up counts the 3 left out
    kept = {c.key for c in report.prediction_costs}
    assert len(kept) == MAX_PREDICTIONS and report.predictions_cut == 3
    assert {r.key for r in fleet[-3:]} <= kept


def test_the_org_report_table_json_and_page_name_each_variant_s_account(book: Any) -> None:
    from costguard.cli.output import render
    from costguard.cli.report import report_data, report_table, report_views
    from costguard.cli.report_html import render as render_html
    from costguard.services.report import ReportRequest, build_report
    from costguard.services.scan import ScanReport

    # GIVEN A's chat at $1.00 per 1,000 and B's ranker serving nothing
    members = Members(InMemoryLedger())
    chat = endpoint(SA, "chat", "ml.g5.xlarge")
    ranker = endpoint(SB, "ranker", "ml.g5.xlarge")
    members.fleet = {SA: [chat], SB: [ranker]}
    members.served = {chat.key: steady_invocations(1408, TICK), ranker.key: {}}
    seen: list[ScanReport] = []
    aggregation = Aggregation(
        book,
        members.ledger,
        OrgSettings(scope=HUB),
        after=lambda report, _f, _p, _now: seen.append(report) or (),
    )
    work = SliceWork(book, members.scan, aggregation, ())
    book.plan(TICK, [SA, SB], TICK + timedelta(minutes=10))
    work.run(TICK, SA, NOW)
    work.run(TICK, SB, NOW)
    # WHEN the month report is built from the Organization's rolled-up scan
    (rolled,) = seen
    # (whose own text names each variant's account and region, too)
    from costguard.cli.scan_output import report_table as scan_text

    lines = scan_text(rolled)
    assert f"{A} us-east-1 chat/primary: $1.0000 per 1,000" in lines
    assert f"{B} us-west-2 ranker/primary: no traffic" in lines
    report = build_report(rolled, members.ledger, ReportRequest(month="2026-11"), NOW)
    # THEN its JSON has both variants with their account-qualified keys and figures
    data = {c["resource"]: c for c in report_data(report)["cost_per_prediction"]}
    assert data[chat.key]["usd_per_1000_predictions"] == 1.0
    assert data[ranker.key]["usd_per_1000_predictions"] is None
    assert data[ranker.key]["status"] == "no traffic"
    # AND its table names each variant's account and region ($1.4080/h over 1,408 an hour)
    text = render(
        "text",
        kind="report",
        data={},
        table=report_table(report),
        views=report_views(report),
        generated_at=NOW,
    )
    (chat_line,) = [line for line in text.splitlines() if "chat/primary" in line]
    assert A in chat_line and "us-east-1" in chat_line and "$1.0000" in chat_line
    (ranker_line,) = [line for line in text.splitlines() if "ranker/primary" in line]
    assert B in ranker_line and "us-west-2" in ranker_line and "no traffic" in ranker_line
    # AND the page's section has an account column, and no $0 for the idle ranker
    page = render_html(report)
    section = page[page.index("<h2>Cost per 1,000 predictions</h2>") :]
    section = section[: section.index("</table>")]
    assert "<thead><tr><th>Account</th><th>Endpoint variant</th>" in section
    assert f'<td data-label="Account">{A}<br><span class=key>us-east-1</span></td>' in section
    assert f'<td data-label="Account">{B}<br><span class=key>us-west-2</span></td>' in section
    assert "$0.0000" not in section


def test_scan_accounts_json_and_markdown_carry_every_account_s_variants() -> None:
    import contextlib
    import io
    import json

    from costguard.cli.org import AccountScan, print_accounts

    # GIVEN the laptop's scans of A (chat at $1.00 per 1,000) and B (ranker, no traffic)
    members = Members(InMemoryLedger())
    chat = endpoint(SA, "chat", "ml.g5.xlarge")
    ranker = endpoint(SB, "ranker", "ml.g5.xlarge")
    members.fleet = {SA: [chat], SB: [ranker]}
    members.served = {chat.key: steady_invocations(1408, TICK), ranker.key: {}}
    results = [AccountScan(s.account, report=members.scan(s).run(TICK)) for s in (SA, SB)]
    # WHEN the accounts are printed as JSON, then markdown
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert print_accounts(results, "json", TICK) == 0
    doc = json.loads(out.getvalue())["data"]
    # THEN the document lists every account's variants in one list, each with its account
    rows = {(r["account"], r["region"], r["endpoint"]): r for r in doc["cost_per_prediction"]}
    assert rows[(A, "us-east-1", "chat")]["usd_per_1000_predictions"] == 1.0
    idle = rows[(B, "us-west-2", "ranker")]
    assert (idle["usd_per_1000_predictions"], idle["status"]) == (None, "no traffic")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_accounts(results, "markdown", TICK)
    # AND the markdown has one cost-per-prediction table with an account column
    page = out.getvalue()
    section = page[page.index("Cost per 1,000 predictions") :]
    assert (
        f"| {A} | us-east-1 | chat/primary | ml.g5.xlarge | $1.41/h | 1,408 | $1.0000 |" in section
    )
    assert f"| {B} | us-west-2 | ranker/primary | ml.g5.xlarge | $1.41/h | 0 | no traffic |" in (
        section
    )
