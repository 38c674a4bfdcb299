"""Hostile tests of the price refresh: malformed Price List answers, a stored catalog that is
corrupt or rolled back, and what the refresh says about as_of."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from costguard.adapters.catalog import read_catalog_file
from tests.support.catalog import FIXTURE_CATALOG_PATH
from tests.support.clock import MIDDAY
from tests.support.fake_price_list import FakePriceList, price_item, price_list_server


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


def refresh_cli(fake: FakePriceList, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "costguard.cli", "prices", "refresh", "--quiet", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "AWS_ENDPOINT_URL": fake.url},
        timeout=120,
        check=False,
    )


def bundled_g5() -> Decimal:
    return read_catalog_file().ec2["us-east-1"]["g5.xlarge"]


# -- malformed prices from the Price List API ----------------------------------------------


@pytest.mark.parametrize("usd", ["NaN", "Infinity", "not-a-number"])
def test_a_malformed_price_in_the_price_list_is_skipped_not_a_traceback(
    tmp_path: Path, usd: str
) -> None:
    """Defect: pricing_api.on_demand_usd does Decimal(str(...)) then `usd > 0`; "NaN" and a
    non-number raise decimal.InvalidOperation, and "Infinity" passes, is held, and makes the
    catalog document invalid (pydantic finite_number): every one escapes cli.failure() as a
    traceback, and the refresh of every other rate is lost."""
    # GIVEN a Price List API whose pricePerUnit.USD is not a finite number
    fake = FakePriceList(usd=usd)
    out = tmp_path / "prices.json"
    with price_list_server(fake):
        # WHEN the catalog is refreshed
        done = refresh_cli(fake, "--region", "us-east-1", "--out", str(out))
    # THEN the bad price is not a rate: no traceback, a one-line answer, the old rate kept
    assert "Traceback" not in done.stderr, done.stderr[-800:]
    assert done.stderr.strip() == "" or done.stderr.strip().splitlines()[-1].startswith(
        "costguard:"
    )
    if out.exists():
        assert read_catalog_file(out).ec2["us-east-1"]["g5.xlarge"] == bundled_g5()


def test_a_huge_fetched_price_is_held_and_reported_not_a_crash(tmp_path: Path) -> None:
    """Defect: a fetched price of 1e30 is (rightly) held, but HeldRate.change_pct rounds a
    29-digit percentage to one decimal place, beyond Decimal's 28-digit context:
    decimal.InvalidOperation in RefreshOutcome.summary(), after the catalog was written,
    so the CLI prints a traceback (exit 1) and the refresh Lambda fails every week."""
    # GIVEN a Price List API that answers an absurd but finite price
    fake = FakePriceList(usd="1000000000000000000000000000000")
    out = tmp_path / "prices.json"
    with price_list_server(fake):
        # WHEN the catalog is refreshed
        done = refresh_cli(fake, "--region", "us-east-1", "--out", str(out))
    # THEN the change is held for review and said so, with no traceback
    assert "Traceback" not in done.stderr, done.stderr[-800:]
    assert done.returncode == 0, done.stderr[-800:]
    summary = json.loads(done.stdout)
    assert any("g5.xlarge" in line for line in summary["held_for_review"])
    assert read_catalog_file(out).ec2["us-east-1"]["g5.xlarge"] == bundled_g5()


@dataclass
class DoubledPriceList(FakePriceList):
    """Answers g5.xlarge twice: the real Linux item, then a second one at another price."""

    extra_attrs: Mapping[str, str] | None = None
    extra_usd: str = "1.3078000000"

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, payload = super().answer(body)
        filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        if "g5.xlarge" in filters.get("instanceType", "").split(","):
            attrs = {"instanceType": "g5.xlarge", "regionCode": filters["regionCode"]}
            payload["PriceList"].append(
                price_item({**attrs, **(self.extra_attrs or {})}, self.extra_usd)
            )
        return status, payload


@pytest.mark.parametrize(
    "extra_attrs",
    [
        pytest.param({}, id="duplicate-sku-other-price"),
        pytest.param(
            {"operatingSystem": "Windows", "licenseModel": "No License required"},
            id="windows-item-mixed-in",
        ),
    ],
)
def test_an_ambiguous_price_list_answer_does_not_silently_replace_a_rate(
    tmp_path: Path, extra_attrs: dict[str, str]
) -> None:
    """Defect: fetch_ec2 keeps whichever item for a type comes last (found[type] = ...), and
    never checks an item's attributes against the filter: a second SKU at another price, or
    a Windows item, silently replaces the Linux rate (+30 %, inside the hold threshold)."""
    import boto3

    from costguard.wiring.refresh import refresh_catalog

    # GIVEN an answer with g5.xlarge at its Linux rate and a second item at +30 %
    fake = DoubledPriceList(extra_attrs=extra_attrs)
    out = tmp_path / "prices.json"
    with price_list_server(fake):
        client = boto3.client("pricing", region_name="us-east-1", endpoint_url=fake.url)
        # WHEN the catalog is refreshed
        summary = refresh_catalog(
            client, regions=("us-east-1",), output=out, today=MIDDAY.date(), sleep=lambda _s: None
        )
    # THEN the Linux rate stands (or the ambiguity is held for review), never the other price
    rate = read_catalog_file(out).ec2["us-east-1"]["g5.xlarge"]
    assert rate == bundled_g5(), (rate, summary["changed"])


def test_a_requested_region_without_prices_keeps_the_catalog_as_of(tmp_path: Path) -> None:
    """Defect (cosmetic, misleading): the README says as_of moves to today only when every
    requested region returned prices. Refreshing all three catalog regions plus a typo
    (us-est-1) moves as_of to today, and the exit-3 message says "as_of stays <today>"."""
    import boto3

    from costguard.wiring.refresh import refresh_catalog

    # GIVEN a catalog checked on 2026-11-01, refreshed for its three regions and a typo
    out = tmp_path / "prices.json"
    out.write_text(FIXTURE_CATALOG_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    before = read_catalog_file(out).as_of
    fake = FakePriceList()
    with price_list_server(fake):
        client = boto3.client("pricing", region_name="us-east-1", endpoint_url=fake.url)
        # WHEN the refresh runs
        summary = refresh_catalog(
            client,
            regions=("us-east-1", "us-west-2", "eu-west-1", "us-est-1"),
            output=out,
            today=MIDDAY.date(),
            sleep=lambda _s: None,
        )
    # THEN the region that returned nothing is listed and as_of keeps its old date
    assert summary["regions_without_prices"] == ["us-est-1"]
    assert read_catalog_file(out).as_of == before, summary["as_of"]


# -- the stored catalog: corrupt, rolled back ------------------------------------------------


class StaticPrices:
    """A PriceSource: g5.xlarge at ``usd`` in every region asked for."""

    def __init__(self, usd: str) -> None:
        self.usd = Decimal(usd)

    def fetch(
        self, region: str, wanted: Mapping[str, frozenset[str]]
    ) -> dict[str, dict[str, Decimal]]:
        return {"ec2": {"g5.xlarge": self.usd}, "sagemaker": {}, "ebs_gb_month": {}}


@pytest.fixture
def table(aws: Any) -> Iterator[Any]:
    from costguard_demo.plumbing import create_ledger_table

    create_ledger_table(aws, "ledger", "us-east-1")
    yield aws.client("dynamodb", region_name="us-east-1")


def refresher(ddb: Any, usd: str) -> Any:
    from costguard.adapters.catalog import CatalogDocuments
    from costguard.adapters.catalog_store import DynamoDbCatalogStore
    from costguard.services.price_refresh import PriceRefresh

    return PriceRefresh(DynamoDbCatalogStore(ddb, "ledger"), StaticPrices(usd), CatalogDocuments())


def test_a_refresh_after_an_operator_rollback_stores_a_new_version(table: Any) -> None:
    """Defect: the history exists "for audit, rollback", but after CURRENT is rolled back to
    an older version, the next refresh writes version max(book, expected) + 1, whose
    VERSION# item already exists: the transaction is cancelled, read as contention, retried
    three times, and RefreshContendedError: no refresh can ever be stored again."""
    from costguard.adapters.catalog_store import CURRENT, PARTITION, version_key

    # GIVEN two refreshes stored, then CURRENT rolled back to the first of them
    first = refresher(table, "1.05").run(("us-east-1",), MIDDAY)
    second = refresher(table, "1.10").run(("us-east-1",), MIDDAY.replace(day=21))
    assert (first.written, second.written) == (True, True)
    old = table.get_item(
        TableName="ledger", Key={"pk": {"S": PARTITION}, "sk": {"S": version_key(first.version)}}
    )["Item"]
    table.put_item(TableName="ledger", Item={**old, "sk": {"S": CURRENT}})
    # WHEN the next weekly refresh runs
    third = refresher(table, "1.12").run(("us-east-1",), MIDDAY.replace(day=28))
    # THEN it stores a new version above every stored one
    assert third.written
    assert third.version > second.version


def test_a_corrupt_stored_catalog_does_not_stop_the_refresh_that_would_repair_it(
    table: Any,
) -> None:
    """Defect: a CURRENT item whose data is not zlib/JSON makes DynamoDbCatalogStore.current()
    raise CatalogStoreError, which PriceRefresh.run does not handle (it handles an *invalid*
    document by starting from the bundled one): the refresh crashes every week, and
    `prices refresh --table` prints a traceback (CatalogStoreError is not in cli.failure)."""
    from costguard.adapters.catalog_store import CURRENT, PARTITION

    # GIVEN a stored catalog item whose document is truncated garbage
    table.put_item(
        TableName="ledger",
        Item={
            "pk": {"S": PARTITION},
            "sk": {"S": CURRENT},
            "version": {"N": "4"},
            "stored_at": {"S": "2026-11-13T12:00:00.000000Z"},
            "as_of": {"S": "2026-11-13"},
            "data": {"B": b"x\x9c\xab\xaeTruncated"},
        },
    )
    # WHEN the weekly refresh runs
    outcome = refresher(table, "1.05").run(("us-east-1",), MIDDAY)
    # THEN it starts from the bundled catalog, stores a new version, and says why
    assert outcome.written
    assert outcome.version > 4
    assert outcome.problem


def test_two_racing_refreshes_store_two_versions_neither_lost(table: Any) -> None:
    """Pinned (held): a refresh that loses the conditional write merges onto the winner."""
    from costguard.adapters.catalog_store import DynamoDbCatalogStore

    store = DynamoDbCatalogStore(table, "ledger")
    a = refresher(table, "1.05")
    b = refresher(table, "1.10")
    raced: list[Any] = []

    # B reads, then A stores first, then B's put must lose and merge again
    from costguard.adapters import catalog_store

    original = catalog_store.DynamoDbCatalogStore.put

    def put_after_a(self: Any, document: Any, *, expected_version: int, at: datetime) -> Any:
        if not raced:
            raced.append(None)
            raced[0] = a.run(("us-east-1",), MIDDAY)
        return original(self, document, expected_version=expected_version, at=at)

    catalog_store.DynamoDbCatalogStore.put = put_after_a  # type: ignore[method-assign]
    try:
        outcome_b = b.run(("us-east-1",), MIDDAY)
    finally:
        catalog_store.DynamoDbCatalogStore.put = original  # type: ignore[method-assign]
    assert raced[0].written and outcome_b.written
    assert outcome_b.version == raced[0].version + 1
    current = store.current()
    assert current is not None
    assert Decimal(current.document["ec2"]["us-east-1"]["g5.xlarge"]) == Decimal("1.10")
    assert date.fromisoformat(current.document["as_of"]) <= MIDDAY.date()


def test_the_readme_does_not_tell_users_to_write_the_package_catalog_the_cli_refuses() -> None:
    """Defect (cosmetic, docs): the README says "To regenerate the packaged catalog itself,
    pass `--out functions/costguard/data/prices.json`", but cli._outside_the_package refuses
    any --out inside the installed package (exit 2) before any request. (The README's
    sections now live in docs/: every page is read.)"""
    repo = Path(__file__).resolve().parents[2]
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    readme = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    # GIVEN the README's instruction, run from the repository root
    done = subprocess.run(
        [
            *(sys.executable, "-m", "costguard.cli", "prices", "refresh", "--quiet"),
            *("--region", "us-east-1", "--out", "functions/costguard/data/prices.json"),
        ],
        capture_output=True,
        text=True,
        cwd=repo,
        # a closed port: nothing can be fetched, so nothing can be written
        env={**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
        timeout=120,
        check=False,
    )
    refused = done.returncode == 2 and "inside the installed costguard package" in done.stderr
    # THEN no page of the docs gives an instruction that the CLI refuses
    assert not (refused and "--out functions/costguard/data/prices.json" in readme)


def test_a_held_change_confirmed_stays_held_and_a_revert_clears_it() -> None:
    """Pinned (held): a held rate keeps its first date when the next refresh confirms it, is
    never applied by confirmation alone, and is cleared when the API goes back to the old rate."""
    from costguard.domain.catalog_merge import Fetched, RateBook, merge

    book = RateBook(1, date(2026, 11, 1), {"ec2": {"us-east-1": {"g5.xlarge": Decimal("1.006")}}})
    jump = [Fetched("us-east-1", {"ec2": {"g5.xlarge": Decimal("3.0")}})]
    first = merge(book, jump, today=date(2026, 11, 8))
    again = merge(first.book, jump, today=date(2026, 11, 15))
    assert again.book.rates["ec2"]["us-east-1"]["g5.xlarge"] == Decimal("1.006")
    assert [h.since for h in again.held] == [date(2026, 11, 8)]
    back = [Fetched("us-east-1", {"ec2": {"g5.xlarge": Decimal("1.006")}})]
    reverted = merge(again.book, back, today=date(2026, 11, 22))
    assert reverted.held == () and reverted.book.held() == []
