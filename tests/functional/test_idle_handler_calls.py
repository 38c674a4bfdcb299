"""The idle guard's whole path through the shipped handler: calls grow with pages, not
with notebooks (counted with a boto3 ``before-call`` hook, one per API call)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.support.clock import MIDDAY
from tests.support.idle_fleet import (
    REGION,
    idle_guard_settings,
    launch,
    notebook_tags,
    publish_ec2,
)

ACCOUNT = "123456789012"
FLEET = 200
IDLE = 100
#: GetMetricData reads at most 500 series a call (a single-GPU notebook: 1 GPU series,
#: then 3 host series where the GPU was idle).
SERIES_PER_CALL = 500


@pytest.fixture
def fleet(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    """200 single-GPU EC2 notebooks launched 3 hours ago, the first 100 idle; the ledger
    table and the alert topic; moto's CloudWatch indexed (same answers, SEARCH evaluated)."""
    from costguard import events
    from costguard_demo.plumbing import create_alert_channels, create_ledger_table
    from tests.support.fake_cloudwatch import indexed_moto_cloudwatch

    monkeypatch.setattr(events, "CLOCK", lambda: MIDDAY)
    create_ledger_table(aws, "ledger", REGION)
    topic, _ = create_alert_channels(aws, REGION)
    ids = launch(aws, notebook_tags(), at=MIDDAY - timedelta(hours=3), count=FLEET)
    for n, iid in enumerate(ids):
        gpu = 0.0 if n < IDLE else 60.0
        publish_ec2(aws, iid, MIDDAY - timedelta(hours=2), MIDDAY + timedelta(hours=4), gpu=(gpu,))
    with indexed_moto_cloudwatch():
        yield aws, topic


def run_passes(session: Any, topic: str, *, dry_run: bool, passes: int) -> list[dict[str, Any]]:
    """The handler, hourly; each pass's calls by operation and its outcomes."""
    from costguard import wiring
    from costguard.handlers import act

    settings = idle_guard_settings(topic, dry_run=dry_run, account=ACCOUNT)
    calls: Counter[str] = Counter()
    session.events.register(
        "before-call",
        lambda model, **_: calls.update([f"{model.service_model.service_name}.{model.name}"]),
    )
    out = []
    for p in range(passes):
        now = MIDDAY + timedelta(hours=p)
        calls.clear()
        wiring.CATALOG_CACHE.clear()  # an hour on, the catalog is read again
        report = act.process({"time": now.isoformat()}, settings, session, clock=now)
        out.append({"calls": Counter(calls), "outcomes": dict(report.counts)})
    return out


def pages(idle: int, due: int = 0) -> int:
    """What one pass reads, in pages: the notebooks (DescribeInstances, 1,000 a page), the
    notebook instances (ListNotebookInstances), their series (GetMetricData, 500 a call:
    every GPU, then the host of the idle ones; the ``due`` ones, warned an hour ago, over
    the time since their warning, one range of their own), and the price catalog."""
    gpu_calls = math.ceil((FLEET - due) / SERIES_PER_CALL) + math.ceil(due / SERIES_PER_CALL)
    host_calls = math.ceil(3 * idle / SERIES_PER_CALL)
    return math.ceil(FLEET / 1000) + 1 + gpu_calls + host_calls + 1


def test_a_dry_run_pass_costs_pages_not_a_call_per_idle_notebook(fleet: Any) -> None:
    """Defect: in dry-run (the default deployment) the handler made a call per idle
    notebook every pass: a DescribeInstances re-check and an audit PutItem for each
    (1,008 calls a pass for 1,000 notebooks, half idle; 205 for this fleet).

    GIVEN 200 notebooks, 100 idle, WHEN the guard's handler runs three hourly passes in
    dry-run THEN each pass costs its pages, plus one read of what the last pass reported;
    the first also writes its 100 reports in one item and remembers them (two writes);
    the next ones write nothing."""
    session, topic = fleet
    first, second, third = run_passes(session, topic, dry_run=True, passes=3)
    assert first["outcomes"] == second["outcomes"] == {"would-warn": IDLE}
    assert sum(first["calls"].values()) <= pages(IDLE) + 1 + 2, first["calls"]
    for steady in (second, third):
        assert sum(steady["calls"].values()) <= pages(IDLE) + 1, steady["calls"]
        assert not {"dynamodb.PutItem", "dynamodb.BatchWriteItem"} & set(steady["calls"])
    assert first["calls"]["dynamodb.BatchWriteItem"] == 1


def test_an_enforcing_pass_costs_pages_plus_the_actions_own_calls(fleet: Any) -> None:
    """GIVEN the same fleet WHEN the handler enforces, hourly (grace 60 minutes)
    THEN the pass that warns the 100 idle notebooks costs its pages and at most 5 calls
    a warning (claim, tag, message, record, confirm) with their audit records batched;
    the pass that stops them, at most 8 a stop (its own look and withdrawal check just
    before acting, claim, stop, confirm, audit, untag, message) and one read of the
    warnings' records per 50;
    and the pass after, with only busy notebooks left running, its pages alone."""
    session, topic = fleet
    warn, stop, after = run_passes(session, topic, dry_run=False, passes=3)
    assert warn["outcomes"] == {"warned": IDLE}
    assert stop["outcomes"] == {"acted": IDLE}
    assert after["outcomes"] == {}
    audit_batches = 1
    assert sum(warn["calls"].values()) <= pages(IDLE) + 5 * IDLE + audit_batches, warn["calls"]
    assert warn["calls"]["ec2.DescribeInstances"] == 1  # the policy's listing serves
    # one BatchGetItem per 100 ledger records: each warned notebook's warning, its
    # withdrawal, and its owner's "act now" answer
    statuses = math.ceil(3 * IDLE / 100)
    bound = pages(IDLE, due=IDLE) + 8 * IDLE + statuses
    assert sum(stop["calls"].values()) <= bound, stop["calls"]
    assert sum(after["calls"].values()) <= pages(0), after["calls"]
