"""The fixture price catalog: unit and functional tests price against it, not the bundled file.

The bundled ``data/prices.json`` follows AWS (``costguard prices refresh`` rewrites it), so
a test that asserted its figures would break on a routine refresh. The fixture's rates
stay put; ``tests/unit/test_bundled_catalog.py`` is the one test of the bundled data.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from functools import cache
from pathlib import Path

from costguard.adapters.catalog import load_catalog
from costguard.domain.pricing import PriceCatalog

FIXTURE_CATALOG_PATH = Path(__file__).resolve().parent.parent / "fixtures" / "prices.json"


@cache
def fixture_catalog() -> PriceCatalog:
    """The small, stable catalog every priced test uses (loaded once, through the real loader)."""
    return load_catalog(FIXTURE_CATALOG_PATH)


@cache
def storage_catalog() -> PriceCatalog:
    """The fixture catalog with storage rates set in the test (us-east-1): gp3 IOPS above
    3,000 at $0.005 and MiB/s above 125 at $0.04; io1 IOPS $0.065; io2 IOPS in three
    tiers ($0.065, above 32,000 $0.0455, above 64,000 $0.03185); snapshots $0.05; S3
    Standard $0.023, Standard-IA $0.0125, Glacier $0.0036, Deep Archive $0.00099 per
    GB-month. (The fixture's GB-month volume rates: gp3 0.08, io1/io2 0.125, gp2 0.10.)"""
    d = Decimal
    return replace(
        fixture_catalog(),
        ebs_provisioned_month={
            "us-east-1": {
                "gp3": {"iops": [(3000, d("0.005"))], "throughput_mibps": [(125, d("0.04"))]},
                "io1": {"iops": [(0, d("0.065"))]},
                "io2": {"iops": [(0, d("0.065")), (32000, d("0.0455")), (64000, d("0.03185"))]},
            }
        },
        ebs_snapshot_gb_month={"us-east-1": d("0.05")},
        s3_class_gb_month={
            "us-east-1": {
                "standard": d("0.023"),
                "standard_ia": d("0.0125"),
                "glacier": d("0.0036"),
                "deep_archive": d("0.00099"),
            }
        },
    )


@cache
def round_rates_catalog() -> PriceCatalog:
    """:func:`storage_catalog` with round rates in us-east-1, for figures checked by hand:
    g5.xlarge at $1.00/h, gp3 at $0.10 per GB-month (a 730 GiB gp3 volume at the baseline
    3,000 IOPS and 125 MiB/s is $0.10/h: 730 x 0.10 / 730)."""
    base = storage_catalog()
    ec2 = {**base.ec2, "us-east-1": {**base.ec2["us-east-1"], "g5.xlarge": Decimal("1.00")}}
    ebs = {
        **base.ebs_gb_month,
        "us-east-1": {**base.ebs_gb_month["us-east-1"], "gp3": Decimal("0.10")},
    }
    return replace(base, ec2=ec2, ebs_gb_month=ebs)
