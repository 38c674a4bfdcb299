"""Spot interruption-frequency buckets and discounts, as the EC2 Spot Instance Advisor
publishes them, turned into an hourly interruption rate.

The Advisor says, per type and region, which bucket its "frequency of interruption" fell
in over the trailing month (<5 %, 5-10 %, 10-15 %, 15-20 %, >20 %: the share of that
type's spot capacity reclaimed in a month) and its typical saving over on-demand. A
bucket is a range: the table names the monthly rate that stands for each bucket, and
reading a rate *p* per month as a Poisson process gives the hourly rate
``lambda = -ln(1 - p) / 730`` (so that 1 - exp(-730 lambda) = p).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from costguard.domain.money import HOURS_PER_PRICING_MONTH

BUCKETS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")


@dataclass(frozen=True, slots=True)
class SpotProfile:
    """What spot looks like for one type: its interruption bucket and saving."""

    bucket: str
    #: Typical saving over on-demand, a fraction (0.6 = spot costs 40 % of on-demand).
    saving: Decimal
    #: Where this row came from: "table" (a family or type row) or "default".
    basis: str = "table"


@dataclass(frozen=True, slots=True)
class SpotTable:
    """The catalog's dated bucket table."""

    as_of: date
    source: str
    #: Bucket -> the monthly interruption probability that stands for it.
    bucket_monthly_rate: Mapping[str, Decimal]
    default: SpotProfile
    #: Instance family ("p5") or type ("p5.48xlarge") -> profile; the type wins.
    profiles: Mapping[str, SpotProfile] = field(default_factory=dict)

    def profile(self, instance_type: str) -> SpotProfile:
        bare = instance_type.removeprefix("ml.")
        found = self.profiles.get(bare) or self.profiles.get(bare.rsplit(".", 1)[0])
        return found if found is not None else self.default

    def hourly_rate(self, bucket: str) -> Decimal:
        return hourly_rate(self.bucket_monthly_rate[bucket])


def hourly_rate(monthly_probability: Decimal) -> Decimal:
    """Poisson rate per hour whose chance of at least one event in 730 h is the given one.

    ``-ln(1 - p) / 730``; p = 0 gives 0, and p >= 1 is refused (it is not a probability
    of *some* interruption, it is certainty, which no rate reaches).
    """
    if not Decimal(0) <= monthly_probability < 1:
        raise ValueError(
            f"a monthly interruption probability is in [0, 1), got {monthly_probability}"
        )
    return -(1 - monthly_probability).ln() / HOURS_PER_PRICING_MONTH
