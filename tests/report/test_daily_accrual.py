"""Spend by UTC day: accrue splits an interval at midnight as it splits it at month ends."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from costguard.domain.attribution import AttributedResource
from costguard.domain.models import Resource, ResourceKind
from costguard.domain.pricing import PricedResource
from costguard.domain.spend import Increment, Observation, accrue

RATE = Decimal("3.6")  # $3.60/h: a second costs a tenth of a cent


def gpu(rate: Decimal | None = RATE, key: str = "i-1") -> AttributedResource:
    r = Resource(
        id=key, kind=ResourceKind.EC2_INSTANCE, region="us-east-1", instance_type="g5.xlarge"
    )
    return AttributedResource(PricedResource(r, rate, "test"), "llm", None, None, "tag")


def seen(at: datetime, key: str = "i-1") -> dict[str, Observation]:
    full = f"us-east-1/ec2-instance/{key}"
    return {full: Observation(full, "llm", RATE, at, at)}


def test_an_interval_across_midnight_is_split_between_the_two_days() -> None:
    # GIVEN a resource last seen at 23:00 on the 20th
    before = datetime(2026, 11, 20, 23, 0, tzinfo=UTC)
    # WHEN the next scan runs at 01:00 on the 21st
    inc = accrue([gpu()], seen(before), before + timedelta(hours=2)).increments[("llm", "2026-11")]
    # THEN each day holds its own hour
    assert inc.days == {20: RATE, 21: RATE}
    assert inc.usd == 2 * RATE


def test_an_interval_across_a_month_end_puts_each_day_in_its_month() -> None:
    # GIVEN a resource last seen at 23:00 on 31 October
    before = datetime(2026, 10, 31, 23, 0, tzinfo=UTC)
    # WHEN the next scan runs at 01:00 on 1 November
    got = accrue([gpu()], seen(before), before + timedelta(hours=2)).increments
    # THEN October's 31st and November's 1st each hold an hour, in their own month
    assert got[("llm", "2026-10")].days == {31: RATE}
    assert got[("llm", "2026-11")].days == {1: RATE}


def test_a_leap_day_is_a_day_of_its_own() -> None:
    # GIVEN a resource last seen at 23:00 on 28 February 2028 (a leap year)
    before = datetime(2028, 2, 28, 23, 0, tzinfo=UTC)
    # WHEN the next scan runs at 01:00 on 1 March
    got = accrue([gpu()], seen(before), datetime(2028, 3, 1, 1, 0, tzinfo=UTC)).increments
    # THEN the 29th holds a whole day, and March its first hour
    assert got[("llm", "2028-02")].days == {28: RATE, 29: 24 * RATE}
    assert got[("llm", "2028-03")].days == {1: RATE}


def test_the_last_second_of_a_day_stays_in_that_day() -> None:
    # GIVEN a resource last seen at 23:59:59
    before = datetime(2026, 11, 20, 23, 59, 59, tzinfo=UTC)
    # WHEN the next scan runs two seconds later
    inc = accrue([gpu()], seen(before), before + timedelta(seconds=2)).increments[
        ("llm", "2026-11")
    ]
    # THEN one second is the 20th's and one the 21st's
    second = RATE / 3600
    assert inc.days == {20: second, 21: second}


def test_a_first_sighting_back_fills_each_day_from_the_month_start() -> None:
    # GIVEN a resource never seen, launched last month, first scanned at 06:00 on the 3rd
    launched = datetime(2026, 10, 20, tzinfo=UTC)
    r = gpu()
    r = r._replace(
        priced=r.priced._replace(resource=replace(r.priced.resource, launched_at=launched))
    )
    inc = accrue([r], {}, datetime(2026, 11, 3, 6, 0, tzinfo=UTC)).increments[("llm", "2026-11")]
    # THEN the 1st and 2nd hold whole days, the 3rd its six hours, and they add up
    assert inc.days == {1: 24 * RATE, 2: 24 * RATE, 3: 6 * RATE}
    assert sum(inc.days.values()) == inc.usd


def test_an_unpriced_resource_adds_no_day_at_all_never_a_zero_dollar_day() -> None:
    # GIVEN a resource without a price
    before = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
    # WHEN it is scanned again
    got = accrue([gpu(rate=None)], seen(before), before + timedelta(hours=1))
    # THEN nothing is accrued: no month row, no day holding $0
    assert got.increments == {}


def test_increments_add_day_by_day() -> None:
    a = Increment(Decimal(2), Decimal(0), {1: Decimal(1), 2: Decimal(1)})
    b = Increment(Decimal(3), Decimal(1), {2: Decimal(2), 3: Decimal(1)})
    assert (a + b).days == {1: Decimal(1), 2: Decimal(3), 3: Decimal(1)}
