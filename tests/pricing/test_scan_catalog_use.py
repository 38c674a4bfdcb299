"""Hostile tests of how a scan uses the price catalog: the stored one (held rates, a date in
the future, regions only it knows), the CLI's catalog file, and advice on retired types."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.adapters.catalog import read_catalog_file
from costguard.adapters.catalog_store import CatalogCache, CatalogReader
from costguard.domain.catalog_merge import catalog_findings
from tests.support.catalog import FIXTURE_CATALOG_PATH, fixture_catalog
from tests.support.clock import MIDDAY, costguard_at
from tests.support.fakes import InMemoryCatalogStore

TODAY = MIDDAY.date()


def bundled_document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(read_catalog_file().model_dump_json())
    document.update(version=7, **changes)
    return document


def read_stored(document: dict[str, Any], bundled_as_of: Any = None) -> Any:
    """What the deployed scan prices with, given ``document`` in the store."""
    store = InMemoryCatalogStore()
    assert store.put(document, expected_version=0, at=MIDDAY) == document["version"]
    packaged = read_catalog_file()
    if bundled_as_of is not None:
        packaged = packaged.model_copy(update={"as_of": bundled_as_of})
    return CatalogReader(store, cache=CatalogCache(), bundled=lambda: packaged).read()


def test_a_stored_held_rate_with_a_huge_fetched_price_does_not_crash_the_scan() -> None:
    """Defect: catalog_findings() describes every held rate with HeldRate.change_pct, which
    rounds to one decimal place; a held price 1e30 times the current one needs more than
    Decimal's 28 digits: decimal.InvalidOperation, and every deployed scan fails (the held
    value was stored by a refresh, which holds such a change exactly because it is absurd)."""
    # GIVEN a stored catalog in which the refresh held g5.xlarge at $1e30/h for review
    document = bundled_document(as_of=TODAY.isoformat())
    document["rate_sources"] = {
        "ec2": {
            "us-east-1": {
                "g5.xlarge": {
                    "source": "price-list-api",
                    "as_of": TODAY.isoformat(),
                    "held_usd": "1000000000000000000000000000000",
                    "held_since": TODAY.isoformat(),
                }
            }
        }
    }
    document["as_of_by"] = {"ec2": {"us-east-1": TODAY.isoformat()}}
    _catalog, in_use = read_stored(document, bundled_as_of=TODAY - timedelta(days=14))
    assert in_use.source == "stored"
    # WHEN the scan of us-east-1 reports on the catalog
    found = catalog_findings(in_use, ("us-east-1",), TODAY, 30)
    # THEN the held rate is a finding, not a crash
    assert any("g5.xlarge" in f.resource for f in found)


def test_a_stored_catalog_dated_in_the_future_is_not_trusted_as_fresh() -> None:
    """Defect: nothing checks a catalog's dates against today. A stored catalog dated
    2099-01-01 (clock skew, a hand edit) always beats the bundled one, and its rates are
    never stale: catalog_findings computes a negative age and reports nothing, forever."""
    # GIVEN a stored catalog that says it was checked in 2099
    _catalog, in_use = read_stored(bundled_document(as_of="2099-01-01"))
    # WHEN the scan of us-east-1 reports on the catalog
    found = catalog_findings(in_use, ("us-east-1",), TODAY, 30)
    # THEN the impossible date is a finding (or the stored catalog is not used)
    assert in_use.source == "bundled" or found, in_use.describe()


def test_a_newer_package_does_not_unprice_a_region_only_the_stored_catalog_knows() -> None:
    """Defect: CatalogReader falls back to the whole bundled catalog when the package's
    as_of is newer than the stored catalog's newest date, discarding the stored catalog even
    for regions the package does not price at all: after an upgrade every instance in a
    refreshed region such as ap-northeast-1 becomes unpriced until the next refresh."""
    # GIVEN the refresh Lambda stored ap-northeast-1 prices on 2026-11-10
    document = bundled_document(as_of="2026-11-10")
    document["ec2"]["ap-northeast-1"] = {"g5.xlarge": "1.459"}
    document["as_of_by"] = {"ec2": {r: "2026-11-10" for r in document["ec2"]}}
    # AND the deployed package's own catalog is newer, without ap-northeast-1
    catalog, _in_use = read_stored(document, bundled_as_of=TODAY)
    assert "ap-northeast-1" not in read_catalog_file().ec2
    # WHEN the scan prices a g5.xlarge in ap-northeast-1
    rate = catalog.ec2_on_demand("ap-northeast-1", "g5.xlarge")
    # THEN it still has the stored rate
    assert rate is not None


def test_spot_advice_is_never_given_for_a_retired_type() -> None:
    """Defect: advice._spot_advice checks the rate, the accelerator and the run time, never
    catalog.retirement(): an on-demand p3.2xlarge (retired: "may not start again once
    stopped") is told that moving to spot would save $1,116/month, a move AWS no longer
    offers."""
    from costguard.domain.advice import advise
    from costguard.domain.models import (
        Accelerator,
        AcceleratorKind,
        Resource,
        ResourceKind,
    )
    from costguard.domain.pricing import PricedResource

    catalog = fixture_catalog()
    assert catalog.retirement("p3.2xlarge") is not None
    # GIVEN an on-demand p3.2xlarge that has run for ten days
    p3 = Resource(
        "i-0p3",
        ResourceKind.EC2_INSTANCE,
        "us-east-1",
        account="123456789012",
        instance_type="p3.2xlarge",
        launched_at=MIDDAY - timedelta(days=10),
        state="running",
        accelerator=Accelerator(AcceleratorKind.GPU, "V100", 1),
    )
    priced = PricedResource(p3, catalog.ec2_on_demand("us-east-1", "p3.2xlarge"), "ec2 on-demand")
    # WHEN the scan advises
    advice = advise([priced], [], catalog, MIDDAY)
    # THEN spot on a retired type is not offered
    assert [a.code.value for a in advice] == [], advice


# -- the CLI's scan -------------------------------------------------------------------------


@pytest.fixture
def server(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    from costguard_demo.server import embedded_aws

    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    with embedded_aws() as url:
        yield url


def test_a_cli_scan_with_a_stale_catalog_reports_it(server: str, tmp_path: Path) -> None:
    """Defect: cmd_scan passes the chosen catalog to build_scan_service without a
    CatalogInUse, so ScanService never calls catalog_findings: `costguard scan` prices with
    a catalog checked months ago (--catalog, or the refreshed file) and reports no
    price-catalog finding, while the README promises one past priceCatalogMaxAgeDays."""
    # GIVEN a catalog file last checked 2026-01-01 (the fixture's rates)
    old = json.loads(FIXTURE_CATALOG_PATH.read_text(encoding="utf-8"))
    old["as_of"] = "2026-01-01"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    assert (MIDDAY.date() - read_catalog_file(path).as_of).days > 30
    # WHEN the user scans with it
    done = subprocess.run(
        [
            *costguard_at(MIDDAY),
            *("scan", "--json", "--quiet"),
            *("--region", "us-east-1", "--sagemaker-tags", "per-resource", "--catalog", str(path)),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COSTGUARD_SAGEMAKER_STUDIO": "false"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-800:]
    report = json.loads(done.stdout)["data"]
    # THEN the report says the prices are stale
    assert any(f["code"] == "price-catalog" for f in report["findings"]), report["findings"]
