"""EBS volumes at the edges of their tiers, priced by hand (us-east-1 reference rates):
io2 at exactly 32,000 IOPS and one above 64,000, gp3 below its baseline, a 16 TiB volume."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from costguard.domain.storage import volume_price

IO2 = {"iops": [(0, D("0.065")), (32000, D("0.0455")), (64000, D("0.03185"))]}
GP3 = {"iops": [(3000, D("0.005"))], "throughput_mibps": [(125, D("0.04"))]}


@pytest.mark.parametrize(
    ("iops", "usd"),
    [
        (32000, D("12.5") + 32000 * D("0.065")),  # the first tier exactly: $2,092.50
        (32001, D("12.5") + 32000 * D("0.065") + D("0.0455")),
        (64001, D("12.5") + 32000 * D("0.065") + 32000 * D("0.0455") + D("0.03185")),
    ],
)
def test_io2_charges_each_iops_in_its_own_tier(iops: int, usd: D) -> None:
    price = volume_price(D("0.125"), IO2, "io2", 100, iops, 0)
    assert price.usd_per_month == usd


def test_gp3_below_its_baseline_and_16_tib_is_its_size_alone() -> None:
    # 16,384 GiB x $0.08; 2,000 IOPS and 100 MiB/s are inside the included 3,000 and 125
    price = volume_price(D("0.08"), GP3, "gp3", 16384, 2000, 100)
    assert price.usd_per_month == D("1310.72")
    assert price.basis == "ebs gp3 gb-month (16384 GiB)"


def test_io2_without_its_iops_rate_is_unpriced_not_its_size_alone() -> None:
    price = volume_price(D("0.125"), None, "io2", 100, 64001, 0)
    assert (price.usd_per_month, price.missing) == (None, "EBS io2 provisioned iops")
