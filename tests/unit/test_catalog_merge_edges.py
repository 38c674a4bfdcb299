"""Edges of the catalog merge and of what a scan says about a catalog: absurd prices,
prices that are not numbers, dates after today, regions that returned nothing."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from costguard.domain.catalog_merge import (
    CatalogInUse,
    Fetched,
    HeldRate,
    RateBook,
    catalog_findings,
    merge,
)

TODAY = date(2026, 11, 20)


def book(as_of: date = date(2026, 11, 1)) -> RateBook:
    return RateBook(1, as_of, {"ec2": {"us-east-1": {"g5.xlarge": Decimal("1.006")}}})


@pytest.mark.parametrize(
    ("current", "fetched", "said"),
    [
        pytest.param("1.006", "1" + "0" * 30, ">+1000000%", id="fetched-1e30"),
        pytest.param("1E-300", "1.006", ">+1000000%", id="current-tiny"),
        pytest.param("1E+999990", "1E+999999", ">+1000000%", id="beyond-decimal-emax"),
        pytest.param("1.006", "1.5", "+49.1%", id="ordinary"),
        pytest.param("1.006", "0.001", "-99.9%", id="a-fall"),
    ],
)
def test_describes_a_held_change_of_any_size_without_a_decimal_error(
    current: str, fetched: str, said: str
) -> None:
    # GIVEN a held rate whose change may exceed Decimal's 28 digits
    held = HeldRate("ec2", "us-east-1", "g5.xlarge", Decimal(current), Decimal(fetched), TODAY)
    # WHEN it is described  THEN the percentage is said, capped, never a crash
    assert f"{said} from" in held.describe()


@pytest.mark.parametrize("usd", ["NaN", "Infinity", "-Infinity", "0", "-1.2"])
def test_a_fetched_price_that_is_not_a_positive_finite_number_keeps_the_last_rate(
    usd: str,
) -> None:
    # GIVEN a source that answered g5.xlarge with something that is not a price
    fetched = [Fetched("us-east-1", {"ec2": {"g5.xlarge": Decimal(usd)}})]
    # WHEN merged
    result = merge(book(), fetched, today=TODAY)
    # THEN the rate is kept, and the answer is listed as rejected
    assert result.book.rates["ec2"]["us-east-1"]["g5.xlarge"] == Decimal("1.006")
    assert result.held == ()
    assert [r.split(":")[0] for r in result.rejected] == ["ec2/us-east-1/g5.xlarge"]


@pytest.mark.parametrize("failed", [None, "ThrottlingException"])
def test_the_catalog_date_stays_when_a_region_asked_for_returned_nothing(
    failed: str | None,
) -> None:
    # GIVEN every catalog region read, and one more region that returned nothing / failed
    fetched = [
        Fetched("us-east-1", {"ec2": {"g5.xlarge": Decimal("1.006")}}),
        Fetched("us-est-1", {}, failed=failed),
    ]
    # WHEN merged  THEN the read region is dated today, the catalog keeps its date
    result = merge(book(), fetched, today=TODAY)
    assert result.book.region_as_of("ec2", "us-east-1") == TODAY
    assert result.book.as_of == date(2026, 11, 1)


def test_a_catalog_dated_after_today_is_a_finding_and_never_a_negative_age() -> None:
    # GIVEN a catalog that says it was checked in 2099 (a wrong clock, a hand edit)
    in_use = CatalogInUse("stored", 7, book(as_of=date(2099, 1, 1)))
    # WHEN a scan of us-east-1 reports on it
    found = catalog_findings(in_use, ("us-east-1",), TODAY, 30)
    # THEN it says so, and its age counts from today, not from 2099
    assert [f.resource for f in found] == ["price-catalog/future-date"]
    assert in_use.age_days(("us-east-1",), TODAY) == 0


def test_a_catalog_dated_today_is_not_a_future_date_finding() -> None:
    in_use = CatalogInUse("stored", 7, book(as_of=TODAY))
    assert catalog_findings(in_use, ("us-east-1",), TODAY, 30) == []


def test_the_packaged_catalog_dated_after_a_replayed_scan_is_not_a_finding() -> None:
    # GIVEN the package's own catalog, built after the (replayed, fixed-clock) scan time
    in_use = CatalogInUse("bundled", 1, book(as_of=date(2026, 11, 29)))
    # THEN it is neither stale nor distrusted
    assert catalog_findings(in_use, ("us-east-1",), TODAY, 30) == []
