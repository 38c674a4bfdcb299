"""The scan's advice as a daily, low-severity digest: once per project per UTC day.

Deduplicated by the alert claims (repeated scans, retries, concurrent runs send one),
never louder than ``info``, cut to one message however much advice there is.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal as D
from typing import Any

import pytest

from costguard.adapters.memory import InMemoryLedger
from costguard.adapters.sns import SNS_MAX_BYTES, request_size
from costguard.domain.advice import Advice, AdviceCode
from costguard.domain.alerts import (
    MAX_ADVICE_LINES,
    Alert,
    AlertKind,
    AlertSeverity,
    advice_digest,
    advice_key,
    shrink_steps,
)
from costguard.domain.models import Accelerator, AcceleratorKind, Resource, ResourceKind
from costguard.ports import Inventory
from costguard.rendering import (
    MachineAlert,
    email_subject,
    email_text,
    slack_blocks,
    sns_attributes,
    sns_message,
)
from costguard.services.alerts import AlertService, AlertSettings
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from costguard_demo.slack_standin import slack_error
from tests.support.catalog import fixture_catalog
from tests.support.fakes import (
    RecordingNotifier,
    StaticEndpointMetrics,
    StaticInventory,
    StaticSpotPrices,
)
from tests.unit.test_rendering import assert_within_block_kit_limits

DAY1 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
A100 = Accelerator(AcceleratorKind.GPU, "A100", 8, 327680, "NVIDIA")
#: The fixture's oversized-endpoint saving, by hand: one ml.g5.xlarge instead of a p4d.
ENDPOINT_SAVING = (D("25.251") - D("1.408")) * 730  # $17,405.39


def piece(resource: str, usd: str, code: AdviceCode = AdviceCode.OVERSIZED_ENDPOINT) -> Advice:
    return Advice(code, resource, D(usd), f"why {resource}: assumes something")


# -- the digest, pure -----------------------------------------------------------------------


def test_lists_each_saving_and_why_largest_first_at_the_lowest_severity() -> None:
    # GIVEN three pieces of advice for one project, one under the $50 minimum
    advice = [
        piece("us-east-1/ec2-instance/i-1", "1200", AdviceCode.SPOT_WITH_CHECKPOINTING),
        piece("us-east-1/sagemaker-endpoint/chat/primary", "17405.39"),
        piece("us-east-1/eks-nodegroup/c/ng", "49.99", AdviceCode.PENDING_CAPACITY_COST),
    ]
    # WHEN the day's digest is built
    alert = advice_digest("serving", advice, DAY1, min_usd_per_month=D(50), owners=["a@x.io"])
    # THEN it is info, once a day for the project, and lists the two over $50 by saving
    assert alert is not None
    assert alert.kind is AlertKind.ADVICE_DIGEST and alert.severity is AlertSeverity.INFO
    assert alert.dedupe == ("advice/2026-11-20/p/serving",)
    assert alert.alert_id == "advice-digest/2026-11-20/p/serving"
    # by hand: 17,405.39 + 1,200.00 = 18,605.39
    assert alert.title == "serving: 2 changes would save about $18,605.39/month"
    assert alert.facts["saving_per_month"] == "$18,605.39"
    assert alert.details == (
        "$17,405.39/month · oversized-endpoint · us-east-1/sagemaker-endpoint/chat/primary: "
        "why us-east-1/sagemaker-endpoint/chat/primary: assumes something",
        "$1,200.00/month · spot-with-checkpointing · us-east-1/ec2-instance/i-1: "
        "why us-east-1/ec2-instance/i-1: assumes something",
    )
    assert alert.owners == ("a@x.io",)


def test_nothing_over_the_minimum_is_no_alert() -> None:
    assert advice_digest("p", [piece("k", "49.99")], DAY1, min_usd_per_month=D(50)) is None
    assert advice_digest("p", [], DAY1) is None
    assert advice_digest("p", [piece("k", "0")], DAY1) is None


def test_no_project_and_a_project_named_like_it_never_share_a_claim() -> None:
    assert advice_key(None, DAY1) == "advice/2026-11-20/unattributed"
    assert advice_key("unattributed", DAY1) == "advice/2026-11-20/p/unattributed"
    # a local time is the UTC day it falls on
    tashkent = datetime(2026, 11, 20, 23, 30, tzinfo=timezone(timedelta(hours=5)))
    assert advice_key("p", tashkent) == "advice/2026-11-20/p/p"  # 18:30 UTC
    assert advice_key("p", tashkent.replace(hour=3)) == "advice/2026-11-19/p/p"  # 22:00 UTC


def many(n: int, project: str = "serving") -> Alert:
    """A digest of ``n`` pieces with realistic, long whys and hostile endpoint names."""
    why = (
        "1 x ml.p4d.24xlarge at 3 % GPU utilization per GPU over 24 h; 1 x ml.g6.xlarge "
        "(NVIDIA L4) would save about $17,610.29/month, assuming the model fits one 24 GB "
        "device and its load scales with dense FP16 peak (sized to stay under 50 % busy)"
    )
    advice = [
        Advice(
            AdviceCode.OVERSIZED_ENDPOINT,
            f"123456789012/us-east-1/sagemaker-endpoint/<!channel>&ep-{i:05d}-😀/primary",
            D(10_000) + D(i) / 100,
            why,
        )
        for i in range(n)
    ]
    alert = advice_digest(project, advice, DAY1)
    assert alert is not None
    return alert


def test_five_thousand_pieces_are_one_sns_message_and_one_slack_message() -> None:
    # GIVEN a project with 5,000 pieces of advice (a 256-character project name, too)
    alert = many(5000, project="プロジェクト" * 42 + "abcd")
    # THEN the digest lists the 25 largest and counts the rest with their total
    assert len(alert.details) == MAX_ADVICE_LINES + 1
    assert alert.details[0].startswith("$10,049.99/month")
    # rest: $10,000 + i/100 for i in 0..4974: 4,975 x 10,000 + (4,974 x 4,975 / 2) / 100
    #     = 49,750,000 + 123,728.25
    assert alert.details[-1].startswith(
        "and 4,975 more pieces of advice, about $49,873,728.25/month together"
    )
    assert alert.facts["pieces_of_advice"] == "5000"
    # AND its SNS request, as the notifier sends it, is one message under 256 KiB
    form = next(
        f
        for f in shrink_steps(alert)
        if request_size(sns_message(f), email_subject(f), sns_attributes(f)) <= SNS_MAX_BYTES  # type: ignore[arg-type]
    )
    assert form is alert, "the digest fits without being shrunk"
    body = json.loads(sns_message(alert))
    assert "and 4,975 more pieces" in body["email"]
    # AND the Slack notifier renders the lambda rendering as one valid Block Kit message
    payload = slack_blocks(MachineAlert.model_validate_json(body["lambda"]))
    assert_within_block_kit_limits(payload)
    assert slack_error(json.dumps(payload).encode()) is None
    text = "\n".join(
        b["text"]["text"] for b in payload["blocks"] if b["type"] == "section" and "text" in b
    )
    assert "$10,049.99/month" in text and "more lines" in text
    assert "<!channel>" not in text  # escaped, not a mention


def test_email_and_slack_both_carry_the_saving_and_why_of_each_listed_piece() -> None:
    alert = advice_digest(
        "serving",
        [piece("us-east-1/sagemaker-endpoint/chat/primary", "17405.39")],
        DAY1,
    )
    assert alert is not None
    email = email_text(alert)
    assert "$17,405.39/month · oversized-endpoint" in email and "assumes something" in email
    payload = slack_blocks(
        MachineAlert.model_validate_json(json.loads(sns_message(alert))["lambda"])
    )
    assert_within_block_kit_limits(payload)
    sections = [
        b["text"]["text"] for b in payload["blocks"] if "text" in b and b["type"] == "section"
    ]
    assert any(
        "$17,405.39/month · oversized-endpoint" in s and "assumes something" in s for s in sections
    )


# -- the service: once a day, per project ------------------------------------------------------


def endpoint(name: str, project: str | None) -> Resource:
    return Resource(
        id=f"{name}/primary",
        kind=ResourceKind.SAGEMAKER_ENDPOINT,
        region="us-east-1",
        instance_type="ml.p4d.24xlarge",
        launched_at=DAY1 - timedelta(days=3),
        config_since=DAY1 - timedelta(days=3),
        name=name,
        tags={"costguard:project": project} if project else {},
    )


class World:
    """Scans and alerts of one account, with the in-memory ledger shared by every run."""

    def __init__(self, **settings: Any) -> None:
        self.ledger = InMemoryLedger()
        self.sent: list[Alert] = []
        self.notifier = RecordingNotifier(self.sent)  # type: ignore[arg-type]
        self.fleet = [endpoint("chat", "serving"), endpoint("orphan", None)]
        self.utilization = {r.key: D(8) for r in self.fleet}
        self.settings = AlertSettings(scope="acct", **settings)

    def scan(self, now: datetime) -> ScanReport:
        return ScanService(
            [StaticInventory("sagemaker", {"us-east-1": Inventory(tuple(self.fleet))})],
            StaticSpotPrices({}),
            fixture_catalog(),
            self.ledger,
            ScanSettings(scope="acct", regions=("us-east-1",)),
            endpoint_metrics=StaticEndpointMetrics(self.utilization),
        ).run(now)

    def cycle(self, now: datetime) -> list[Alert]:
        report = self.scan(now)
        run = AlertService(self.ledger, self.notifier, self.settings).attempt(report, now)
        run.raise_if_failed()
        return [a for a in run.sent if a.kind is AlertKind.ADVICE_DIGEST]


def test_two_scans_on_one_day_send_one_digest_a_project_and_the_next_day_another() -> None:
    world = World()
    # WHEN the scan runs at 09:00 and 09:15 UTC
    first = world.cycle(DAY1)
    second = world.cycle(DAY1 + timedelta(minutes=15))
    # THEN the first sends one digest for the project and one for the unattributed endpoint
    assert sorted((a.project or "-", a.severity.value) for a in first) == [
        ("-", "info"),
        ("serving", "info"),
    ]
    serving = next(a for a in first if a.project == "serving")
    assert serving.facts["saving_per_month"] == f"${ENDPOINT_SAVING:,.2f}" == "$17,405.39"
    # AND the second sends none
    assert second == []
    # AND the last scan of the day (23:45) none, the first of the next day (00:00) none
    # (before the digest hour), the next day's 08:00 scan both again
    assert world.cycle(DAY1.replace(hour=23, minute=45)) == []
    assert world.cycle(DAY1 + timedelta(hours=15)) == []
    again = world.cycle(DAY1 + timedelta(hours=23))
    assert sorted(a.dedupe[0] for a in again) == [
        "advice/2026-11-21/p/serving",
        "advice/2026-11-21/unattributed",
    ]


def test_concurrent_runs_of_the_same_scan_send_one_digest() -> None:
    # GIVEN one report, alerted by eight runs at once (overlapping scans, a retried Lambda)
    world = World()
    report = world.scan(DAY1)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            AlertService(world.ledger, world.notifier, world.settings).attempt(
                report, DAY1
            ).raise_if_failed()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN each digest went out exactly once
    assert errors == []
    digests = [a.dedupe[0] for a in world.sent if a.kind is AlertKind.ADVICE_DIGEST]
    assert sorted(digests) == ["advice/2026-11-20/p/serving", "advice/2026-11-20/unattributed"]


class FlakyNotifier(RecordingNotifier):
    def __init__(self, sent: list[Any], failures: int) -> None:
        super().__init__(sent)
        self.failures = failures

    def publish(self, alert: Any) -> str:
        if alert.kind is AlertKind.ADVICE_DIGEST and self.failures > 0:
            self.failures -= 1
            raise RuntimeError("SNS is down")
        return super().publish(alert)


def test_a_failed_publish_is_sent_by_the_next_scan_and_only_once() -> None:
    # GIVEN the first digest's publish fails
    world = World()
    world.fleet = [endpoint("chat", "serving")]
    world.notifier = FlakyNotifier(world.sent, failures=1)
    report = world.scan(DAY1)
    run = AlertService(world.ledger, world.notifier, world.settings).attempt(report, DAY1)
    # THEN the run reports it (for the Lambda's retry) and the claim is released
    assert [f.kind for f in run.failed] == ["advice-digest"]
    # WHEN the next scan runs THEN it sends it; the one after does not
    assert [a.project for a in world.cycle(DAY1 + timedelta(minutes=15))] == ["serving"]
    assert world.cycle(DAY1 + timedelta(minutes=30)) == []


def test_a_digest_another_scan_is_still_sending_is_not_marked_sent() -> None:
    # GIVEN another scan claimed today's digest and crashed before publishing
    world = World()
    world.fleet = [endpoint("chat", "serving")]
    world.ledger.claim("alert", "advice/2026-11-20/p/serving", DAY1, timedelta(minutes=10), {})
    # WHEN this scan runs THEN it does not send it (the claim is held) ...
    assert world.cycle(DAY1) == []
    # ... and once the lease is over, the next scan does: delayed, never lost
    assert [a.project for a in world.cycle(DAY1 + timedelta(minutes=15))] == ["serving"]


class CountingLedger(InMemoryLedger):
    def __init__(self) -> None:
        super().__init__()
        self.claims: list[str] = []

    def claim(self, namespace: str, key: str, now: datetime, lease: timedelta, attrs: Any) -> bool:
        self.claims.append(key)
        return super().claim(namespace, key, now, lease, attrs)


def test_the_scans_after_the_days_digest_make_no_claim_for_it() -> None:
    # GIVEN the day's digests are sent
    world = World()
    world.ledger = CountingLedger()
    world.cycle(DAY1)
    assert sum(k.startswith("advice/") for k in world.ledger.claims) == 2
    # WHEN the other 59 scans of the day run
    for n in range(1, 60):
        world.cycle(DAY1 + timedelta(minutes=15 * n))
    # THEN none of them claimed a digest key again (one state read each instead)
    assert sum(k.startswith("advice/") for k in world.ledger.claims) == 2


@pytest.mark.parametrize(
    ("settings", "at"),
    [
        ({"advice_alerts": False}, DAY1),
        ({"advice_min_usd_per_month": ENDPOINT_SAVING + D("0.01")}, DAY1),
        ({}, DAY1.replace(hour=7, minute=59)),  # before the digest hour (8 UTC)
    ],
)
def test_switched_off_under_the_minimum_or_before_the_digest_hour_nothing_is_sent(
    settings: dict[str, Any], at: datetime
) -> None:
    world = World(**settings)
    assert world.cycle(at) == []
    # the report still carries the advice: only the alert is governed by the settings
    assert len(world.scan(at).advice) == 2


def test_on_demand_training_and_endpoints_of_one_project_share_its_digest() -> None:
    # GIVEN the project also runs an on-demand A100 box for three days (spot advice)
    world = World()
    box = Resource(
        "i-train",
        ResourceKind.EC2_INSTANCE,
        "us-east-1",
        instance_type="p4d.24xlarge",
        launched_at=DAY1 - timedelta(days=3),
        accelerator=A100,
        tags={"costguard:project": "serving"},
    )
    world.fleet = [*world.fleet, box]
    # WHEN alerted
    (serving,) = [a for a in world.cycle(DAY1) if a.project == "serving"]
    # THEN one digest lists both, the endpoint's larger saving first
    assert [d.split(" · ")[1] for d in serving.details] == [
        "oversized-endpoint",
        "spot-with-checkpointing",
    ]
    assert replace(serving, details=()).facts["pieces_of_advice"] == "2"


def test_a_late_run_of_yesterdays_scan_does_not_make_today_claim_again() -> None:
    # GIVEN today's digests are sent
    world = World()
    world.ledger = CountingLedger()
    today = DAY1 + timedelta(days=1)
    assert len(world.cycle(today)) == 2
    # WHEN yesterday's scan runs late (a retry from its dead-letter queue, say)
    world.cycle(DAY1)
    # THEN today's next scans still skip today's sent digests, without a claim
    world.cycle(today + timedelta(minutes=15))
    todays = [k for k in world.ledger.claims if k.startswith("advice/2026-11-21/")]
    assert len(todays) == 2
