"""A project with a GPU and its scratch volume at round rates, scanned over in-memory
fakes: the fleet whose month-to-date by category the tests check by hand (g5.xlarge at
$1.00/h, a 730 GiB gp3 volume at $0.10/h, :func:`tests.support.catalog.round_rates_catalog`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from costguard.domain.models import Resource, ResourceKind
from costguard.ports import Inventory
from costguard.services.scan import ProjectReport, ScanReport, ScanService, ScanSettings
from tests.support.catalog import round_rates_catalog
from tests.support.fakes import StaticInventory, StaticSpotPrices


def fleet(created: datetime, team: str | None = None) -> Inventory:
    """Project llm's g5.xlarge and its gp3 volume, both created at ``created``."""
    tags = {"costguard:project": "llm", **({"costguard:team": team} if team else {})}
    return Inventory(
        (
            Resource(
                id="i-gpu",
                kind=ResourceKind.EC2_INSTANCE,
                region="us-east-1",
                instance_type="g5.xlarge",
                availability_zone="us-east-1a",
                launched_at=created,
                tags=tags,
            ),
            Resource(
                id="vol-scratch",
                kind=ResourceKind.EBS_VOLUME,
                region="us-east-1",
                availability_zone="us-east-1a",
                volume_type="gp3",
                size_gib=730,
                iops=3000,
                throughput_mibps=125,
                launched_at=created,
                tags=tags,
            ),
        )
    )


def scan(ledger: Any, at: datetime, created: datetime, team: str | None = None) -> ScanReport:
    """One scan of the fleet at ``at`` over ``ledger`` (tagged ``team`` when given)."""
    service = ScanService(
        sources=[StaticInventory("ec2", {"us-east-1": fleet(created, team)})],
        spot_prices=StaticSpotPrices({}),
        catalog=round_rates_catalog(),
        ledger=ledger,
        settings=ScanSettings(scope="acct", regions=("us-east-1",)),
    )
    return service.run(at)


def llm(report: ScanReport) -> ProjectReport:
    (p,) = [p for p in report.projects if p.project == "llm"]
    return p
