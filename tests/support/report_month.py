"""A month of a realistic ML account, lived through the real scan and ledger, for the
report's tests and benchmarks: an ML fleet in several projects, scanned every few hours
from the 1st (spend accrued by day), a spike mid-month, run-rate samples, actions taken,
warned and dry-run in the audit trail. No wall clock: every instant is given.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.models import Resource, ResourceKind
from costguard.ports import AuditEvent, Inventory, Ledger
from costguard.services.report import ReportRequest, build_report
from costguard.services.scan import ScanReport, ScanService, ScanSettings
from tests.support.catalog import fixture_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices

SCOPE = "123456789012"
#: The report's instant: as the demo's, mid-month in the afternoon.
REPORT_AT = datetime(2026, 11, 18, 14, 0, tzinfo=UTC)
MONTH_START = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Project:
    name: str
    budget: str | None
    owner: str
    #: (instance type, how many, launched on day, stopped on day or None)
    fleet: Sequence[tuple[str, int, float, float | None]]
    team: str = "ml-platform"


#: The demo's projects, in the demo's words.
DEMO_PROJECTS: tuple[Project, ...] = (
    Project(
        "llm-pretraining",
        "12000",
        "alice@example.com",
        [
            ("p4d.24xlarge", 1, 0, None),
            ("p5.48xlarge", 2, 13.5, None),
            ("p9.96xlarge", 1, 15, None),
        ],
        team="research",
    ),
    Project(
        "vision-research",
        "20000",
        "dave@example.com",
        [("g5.12xlarge", 2, 0, None), ("g5.2xlarge", 1, 3, None), ("p5.48xlarge", 1, 9, 11)],
        team="research",
    ),
    Project(
        "nlp-team",
        "8000",
        "bob@example.com",
        [("g5.xlarge", 3, 0, None), ("g6.xlarge", 2, 6, None)],
    ),
    Project("recsys-serving", "15000", "carol@example.com", [("g5.2xlarge", 2, 0, None)]),
    Project("speech-lab", None, "erin@example.com", [("g5.xlarge", 1, 4, None)]),
)


def fleet_at(
    projects: Sequence[Project], at: datetime, *, region: str = "us-east-1"
) -> list[Resource]:
    """The running resources at ``at``: those launched by then and not yet stopped."""
    out = []
    for p, project in enumerate(projects):
        for f, (itype, count, start, stop) in enumerate(project.fleet):
            launched = MONTH_START + timedelta(days=start) - timedelta(days=3 if start == 0 else 0)
            if launched > at or (stop is not None and MONTH_START + timedelta(days=stop) <= at):
                continue
            for n in range(count):
                tags = {"costguard:project": project.name, "costguard:owner": project.owner}
                tags["costguard:team"] = project.team
                if project.budget is not None:
                    tags["costguard:budget"] = project.budget
                out.append(
                    Resource(
                        id=f"i-{p:04x}{f:03x}{n:010x}",
                        kind=ResourceKind.EC2_INSTANCE,
                        region=region,
                        instance_type=itype,
                        availability_zone=f"{region}a",
                        launched_at=launched,
                        tags=tags,
                        state="running",
                    )
                )
    # An untagged box nobody owns: unattributed spend.
    out.append(
        Resource(
            id="i-0000scratchbox",
            kind=ResourceKind.EC2_INSTANCE,
            region=region,
            instance_type="g5.xlarge",
            launched_at=MONTH_START + timedelta(days=10),
            name="scratch-box",
            state="running",
        )
    )
    return out


@dataclass
class Month:
    ledger: Ledger
    scan: ScanReport
    at: datetime
    projects: Sequence[Project] = field(default_factory=tuple)

    def report(self, **request: object) -> object:
        return build_report(
            self.scan,
            self.ledger,
            ReportRequest(month=self.at.strftime("%Y-%m"), **request),  # type: ignore[arg-type]
            self.at,
        )


def live_month(
    projects: Sequence[Project] = DEMO_PROJECTS,
    at: datetime = REPORT_AT,
    *,
    every: timedelta = timedelta(hours=6),
    failing: dict[str, Exception] | None = None,
    ledger: Ledger | None = None,
) -> Month:
    """Scan the fleet every ``every`` from the month's start to ``at``, recording run-rate
    samples as the alert service does, and an audit trail of actions."""
    ledger = ledger or InMemoryLedger()
    cursor = MONTH_START + timedelta(hours=1)
    scan = None
    regions = ("us-east-1", "us-west-2") if failing else ("us-east-1",)
    while True:
        service = ScanService(
            [
                StaticInventory(
                    "ec2",
                    {"us-east-1": Inventory(tuple(fleet_at(projects, cursor)))},
                    failing=failing if cursor == at else None,
                )
            ],
            StaticSpotPrices({}),
            fixture_catalog(),
            ledger,
            ScanSettings(scope=SCOPE, regions=regions),
        )
        scan = service.run(cursor)
        if at - cursor <= timedelta(days=3):
            ledger.record_rates(
                SCOPE,
                cursor,
                {p.project: p.run_rate_usd_per_hour for p in scan.projects if p.project},
            )
        if cursor >= at:
            break
        cursor = min(cursor + every, at)
    ledger.audit_many(list(audit_trail(projects, at)))
    return Month(ledger, scan, at, projects)


def audit_trail(projects: Sequence[Project], at: datetime) -> list[AuditEvent]:
    """Actions of the month: a stop done, a warning pending, a dry-run stop."""
    rng = random.Random(3)
    events = []
    for p in projects[:3]:
        owner = p.owner
        stopped = f"{SCOPE}/us-east-1/sagemaker-notebook/{p.name[:12]}-explore"
        events.append(
            AuditEvent(
                SCOPE,
                at - timedelta(days=2, hours=rng.randint(0, 12)),
                f"acted/stop/{stopped}",
                "stop-notebook",
                stopped,
                "acted",
                {
                    "project": p.name,
                    "owners": [owner],
                    "usd_per_hour_saved": "1.515",
                    "usd_per_month_saved": "1105.95",
                    "deadline": None,
                },
            )
        )
    warned = f"{SCOPE}/us-east-1/ebs-volume/vol-0a1b2c3d4e5f60718"
    events.append(
        AuditEvent(
            SCOPE,
            at - timedelta(hours=5),
            f"warned/{warned}",
            "delete-volume",
            warned,
            "warned",
            {
                "project": projects[0].name,
                "usd_per_month_saved": "80",
                "deadline": (at + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        )
    )
    would = f"{SCOPE}/us-east-1/ec2-instance/i-0idle0gpu0box0001"
    events.append(
        AuditEvent(
            SCOPE,
            at - timedelta(hours=1),
            f"would-act/{would}",
            "stop-instance",
            would,
            "would-act",
            {"project": projects[-1].name, "usd_per_month_saved": "734.38", "deadline": None},
        )
    )
    return events


def many_projects(n: int, per_project: int, *, seed: int = 11) -> list[Project]:
    """``n`` projects of ``per_project`` instances each, some with long or hostile names
    (that a scan accepts: 1 to 256 visible characters)."""
    rng = random.Random(seed)
    types = ["g5.xlarge", "g5.2xlarge", "g5.12xlarge", "p4d.24xlarge", "g6.xlarge"]
    out = []
    for i in range(n):
        name = f"project-{i:03d}"
        if i % 10 == 3:
            name = f"<script>alert({i})</script>"
        if i % 10 == 7:
            name = f"{i:03d}" + "計算機視覚の研究" * 31 + "計"
        out.append(
            Project(
                name,
                str(rng.choice([5000, 12000, 30000, 80000])) if i % 9 else None,
                f"owner{i}@example.com",
                [(rng.choice(types), per_project, rng.choice([0, 0, 2, 5]), None)],
            )
        )
    return out
