"""The one test of the bundled catalog's data (every other test prices against the fixture).

A routine ``costguard prices refresh`` may move any rate; what must hold after it is
checked here: the post-cut P4/P5 rates, no retired type offered, each region's lists
consistent with the retired types, and every rate positive and plausibly ordered.
"""

from __future__ import annotations

import itertools
import re
from datetime import date
from decimal import Decimal

import pytest

from costguard.adapters.catalog import load_catalog, read_catalog_file
from costguard.domain.pricing import PriceCatalog

CATALOG = load_catalog()
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")


def family(itype: str) -> str:
    return itype.removeprefix("ml.").split(".")[0]


def size_units(itype: str) -> Decimal | None:
    """xlarge = 1, 2xlarge = 2, large = 0.5 ...; None for metal and other named sizes."""
    size = itype.rsplit(".", 1)[-1]
    named = {"medium": Decimal("0.25"), "large": Decimal("0.5"), "xlarge": Decimal(1)}
    if size in named:
        return named[size]
    match = re.fullmatch(r"(\d+)xlarge", size)
    return Decimal(match.group(1)) if match else None


#: Sizes where the bigger one has fewer accelerators, so it may cost less (12xlarge: 4 GPUs,
#: 16xlarge: 1 GPU in g5/g6/g6e). Any other inversion is a data error.
FEWER_ACCELERATORS = {("12xlarge", "16xlarge")}


def test_bundled_catalog_carries_the_post_cut_p4_p5_rates() -> None:
    # AWS cut P4/P5 on-demand prices in June 2025; the pre-cut p5.48xlarge was $98.32/h.
    # Price List API, us-east-1, publication 2026-07-28: $21.957642 and $55.04.
    for region in ("us-east-1", "us-west-2"):
        assert CATALOG.ec2_on_demand(region, "p4d.24xlarge") == Decimal("21.957642")
        assert CATALOG.ec2_on_demand(region, "p5.48xlarge") == Decimal("55.04")
    assert CATALOG.sagemaker_rate("us-east-1", "ml.p4d.24xlarge") == Decimal("25.251")
    assert CATALOG.sagemaker_rate("us-east-1", "ml.p5.48xlarge") == Decimal("63.296")
    assert CATALOG.as_of >= date(2025, 7, 1)


@pytest.mark.parametrize("region", REGIONS)
def test_no_retired_type_is_offered_in_any_region(region: str) -> None:
    for service in ("ec2", "sagemaker"):
        offered = CATALOG.offered_types(region, service)
        assert offered, (region, service)
        assert not [t for t in offered if CATALOG.retirement(t)], (region, service)
    assert not [t for t in CATALOG.offered_types(region) if family(t) == "p3"]


def test_p3_is_retired_in_every_size_and_keeps_its_rate() -> None:
    for region in REGIONS:
        for size in ("2xlarge", "8xlarge", "16xlarge"):
            itype = f"p3.{size}"
            assert CATALOG.retirement(itype), itype
            assert CATALOG.ec2_on_demand(region, itype), (region, itype)  # a running one bills


def test_p3dn_and_dl1_are_retired_too_and_keep_their_rates_where_they_ran() -> None:
    # The issue's pricing review: p3 in every size, p3dn included, and dl1.24xlarge.
    for itype in ("p3dn.24xlarge", "dl1.24xlarge"):
        assert CATALOG.retirement(itype), itype
        assert CATALOG.ec2_on_demand("us-east-1", itype), itype
        for region in REGIONS:
            assert itype not in CATALOG.offered_types(region), (region, itype)


@pytest.mark.parametrize("region", REGIONS)
def test_not_offered_agrees_with_the_rates_and_the_retired_types(region: str) -> None:
    absent = CATALOG.not_offered.get(region, frozenset())
    priced_families = {family(t) for t in CATALOG.ec2.get(region, {})}
    # a family is either priced in a region or said not to be offered there, never both
    assert not absent & priced_families
    # a retired family is never said to be "offered": it is in no region's offered types
    for retired in CATALOG.retired:
        assert not [t for t in CATALOG.offered_types(region) if t.startswith(f"{retired}.")]


def test_families_added_for_issue_9_are_priced_where_aws_offers_them() -> None:
    for region in ("us-east-1", "us-west-2"):
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge", "metal"):
            assert CATALOG.ec2_on_demand(region, f"g5g.{size}"), (region, size)
    assert CATALOG.ec2_on_demand("us-west-2", "dl2q.24xlarge")
    assert "g5g" in CATALOG.not_offered["eu-west-1"]
    assert "dl2q" in CATALOG.not_offered["us-east-1"]
    for region in REGIONS:
        assert CATALOG.ec2_on_demand(region, "g4ad.xlarge"), region
    for itype in ("trn2.3xlarge", "trn2u.48xlarge", "trn2.48xlarge", "p5e.48xlarge"):
        assert "Capacity Blocks" in (CATALOG.why_unpriced("us-east-1", itype) or ""), itype


def test_every_region_the_ec2_catalog_covers_has_sagemaker_rates() -> None:
    assert set(CATALOG.sagemaker) >= set(CATALOG.ec2)
    for fam in ("ml.g6", "ml.g6e", "ml.inf2", "ml.p4de"):
        assert any(t.startswith(f"{fam}.") for t in CATALOG.sagemaker["us-east-1"]), fam


def test_every_rate_is_positive() -> None:
    raw = read_catalog_file()
    for table in (raw.ec2, raw.sagemaker, raw.ebs_gb_month):
        for region, rates in table.items():
            assert all(rate > 0 for rate in rates.values()), region


def _ordering_problems(rates: dict[str, Decimal]) -> list[str]:
    problems = []
    by_family: dict[str, list[tuple[Decimal, str, Decimal]]] = {}
    for itype, rate in rates.items():
        units = size_units(itype)
        if units is not None:
            by_family.setdefault(itype.rsplit(".", 1)[0], []).append((units, itype, rate))
    for sizes in by_family.values():
        sizes.sort()
        for (_, small, low), (_, big, high) in itertools.pairwise(sizes):
            pair = (small.rsplit(".", 1)[1], big.rsplit(".", 1)[1])
            if high <= low and pair not in FEWER_ACCELERATORS:
                problems.append(f"{big} ${high} <= {small} ${low}")
    return problems


@pytest.mark.parametrize("region", REGIONS)
def test_a_bigger_size_of_a_family_costs_more(region: str) -> None:
    assert _ordering_problems(dict(CATALOG.ec2.get(region, {}))) == []
    assert _ordering_problems(dict(CATALOG.sagemaker.get(region, {}))) == []


def test_the_ordering_check_catches_an_inversion() -> None:
    # the check above would pass vacuously if it compared nothing
    bad = {"g9.xlarge": Decimal(2), "g9.2xlarge": Decimal(1), "g9.12xlarge": Decimal(9)}
    assert _ordering_problems(bad) == ["g9.2xlarge $1 <= g9.xlarge $2"]


@pytest.mark.parametrize("region", REGIONS)
def test_every_sagemaker_rate_is_above_its_ec2_equivalent(region: str) -> None:
    compared = 0
    for itype, rate in CATALOG.sagemaker.get(region, {}).items():
        ec2_rate = CATALOG.ec2_on_demand(region, itype.removeprefix("ml."))
        if ec2_rate is not None:
            compared += 1
            assert rate > ec2_rate, (region, itype, rate, ec2_rate)
    assert compared > 0


def test_every_confidence_note_names_a_rate_the_catalog_holds() -> None:
    for key in CATALOG.confidence:
        service, *where, itype = key.split("/")
        table: dict[str, dict[str, Decimal]] = {
            "ec2": dict(CATALOG.ec2),  # type: ignore[dict-item]
            "sagemaker": dict(CATALOG.sagemaker),  # type: ignore[dict-item]
        }[service]
        regions = where or list(table)
        assert any(itype in table.get(r, {}) for r in regions), key


def test_bundled_catalog_loads_as_a_domain_catalog() -> None:
    assert isinstance(CATALOG, PriceCatalog)
    assert CATALOG.sources and CATALOG.version >= 3


@pytest.mark.parametrize(
    "fam",
    [
        *("p3dn", "p4d", "p4de", "p5", "p5en", "p6-b200", "p6-b300", "g4dn", "g4ad", "g5"),
        *("g5g", "g6", "g6e", "g6f", "gr6", "g7e", "trn1", "trn1n", "inf2", "dl1"),
    ],
)
@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_catalog_covers_the_accelerated_families(fam: str, region: str) -> None:
    assert any(family(t) == fam for t in CATALOG.ec2[region])
