"""`costguard prices show` as a user runs it, in this process: every rate the guard uses,
in each --format, against golden files; filters that give exactly what was asked; bad
input named; and a refresh whose Price List lacks a type leaving the reason to show.

Regenerate the goldens after an intended change with ``COSTGUARD_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.catalog import FIXTURE_CATALOG_PATH
from tests.support.cli import Done, costguard
from tests.support.fake_price_list import FakePriceList, price_list_server

#: A week after the fixture catalog's date.
AT = datetime(2026, 11, 8, 9, 30, tzinfo=UTC)
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
#: The fixture's path differs per checkout: the goldens say it like this.
FIXTURE_SAID = "tests/fixtures/prices.json"


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`prices show` reads the catalog `prices refresh` left in the user's data dir: not the real one."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


def show(*args: str, catalog: Path = FIXTURE_CATALOG_PATH) -> Done:
    return costguard("prices", "show", "--catalog", str(catalog), *args, at=AT)


def said(text: str) -> str:
    """The output as a golden holds it: the fixture's path and the clock's instant fixed
    (the test clock ticks on from ``AT``)."""
    text = text.replace(str(FIXTURE_CATALOG_PATH), FIXTURE_SAID)
    return re.sub(r'"generated_at": "[^"]*"', '"generated_at": "<AT>"', text)


@pytest.mark.parametrize(
    ("fmt", "suffix"),
    [("table", "txt"), ("json", "json"), ("csv", "csv"), ("markdown", "md")],
)
def test_each_format_matches_its_golden(fmt: str, suffix: str) -> None:
    # GIVEN the fixture catalog (a catalog from before reasons and reference dates)
    # WHEN a user shows what the guard uses in eu-west-1, in each format
    done = show("--region", "eu-west-1", "--format", fmt)
    # THEN it is exactly the golden output: every kind of rate, unpriced rows with reasons
    assert done.returncode == 0, done.stderr
    golden = GOLDEN / f"prices.{suffix}"
    if os.environ.get("COSTGUARD_UPDATE_GOLDEN"):
        golden.write_bytes(said(done.stdout).encode())
    assert said(done.stdout) == golden.read_bytes().decode()


def test_json_is_the_one_envelope_and_json_flag_is_its_synonym() -> None:
    long = show("--region", "eu-west-1", "--format", "json")
    short = show("--region", "eu-west-1", "--json")
    assert said(long.stdout) == said(short.stdout)
    doc = json.loads(long.stdout)
    assert (doc["schema_version"], doc["kind"]) == (2, "prices")
    assert doc["generated_at"].startswith("2026-11-08T09:30:00")
    rates = doc["data"]["rates"]
    # every unpriced rate has a reason and no number: never $0
    assert all(r["reason"] and r["usd"] is None for r in rates if not r["priced"])
    assert {r["service"] for r in rates} == {"ec2", "sagemaker", "ebs", "ebs-snapshot", "s3", "eks"}


def test_csv_rates_are_numbers_and_unpriced_is_a_word() -> None:
    done = show("--region", "eu-west-1", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    g5 = next(r for r in rows if r["name"] == "g5.xlarge")
    assert g5["usd"] == "1.123" and g5["catalog"] == "file v1"
    g6 = next(r for r in rows if r["name"] == "g6.xlarge" and r["service"] == "ec2")
    assert g6["usd"] == "unpriced"
    assert g6["notes"] == "unpriced: g6 instances are not offered in eu-west-1"


def test_one_type_or_one_region_gives_exactly_that() -> None:
    one = json.loads(show("--type", "g5.xlarge", "--region", "us-east-1", "--json").stdout)
    shown = {(r["service"], r["region"], r["name"]) for r in one["data"]["rates"]}
    assert shown == {("ec2", "us-east-1", "g5.xlarge"), ("sagemaker", "us-east-1", "ml.g5.xlarge")}
    family = json.loads(show("--type", "ml.g5", "--service", "sagemaker", "--json").stdout)
    assert {r["name"] for r in family["data"]["rates"]} == {"ml.g5.xlarge", "ml.g5.2xlarge"}
    region = json.loads(show("--region", "us-west-2", "--json").stdout)
    assert {r["region"] for r in region["data"]["rates"]} == {"us-west-2", "all"}


def test_an_unknown_region_is_named_and_exits_2() -> None:
    # GIVEN a region the catalog has never seen
    done = show("--region", "ap-south-2")
    # THEN it is named, with what the catalog does have, not an empty table
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "--region ap-south-2: the price catalog has no rates for ap-south-2" in line
    assert "(it has eu-west-1, us-east-1, us-west-2)" in line


@pytest.mark.parametrize("wanted", ["zz9.huge", "g5.x\nlarge\x1b[2J", "'; DROP", ""])
def test_an_unknown_or_hostile_type_is_named_on_one_line_and_exits_2(wanted: str) -> None:
    done = show("--type", wanted)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "the price catalog knows no such type" in line and "\x1b" not in line


def test_a_known_type_outside_the_asked_service_exits_3_and_says_so() -> None:
    done = show("--type", "gp3", "--service", "eks")
    assert done.returncode == 3 and done.stdout == ""
    assert "no eks rate matching --service eks --type gp3" in done.stderr


@pytest.fixture
def fake() -> Iterator[FakePriceList]:
    # (names the packaged catalog lacks in us-west-2: a refresh adds the package's rates)
    fake = FakePriceList(
        withheld=frozenset({"us-west-2/zz1.xlarge"}), other_terms_only=frozenset({"zz1.2xlarge"})
    )
    with price_list_server(fake):
        yield fake


def test_a_refresh_leaves_the_price_lists_reasons_for_show(
    fake: FakePriceList, tmp_path: Path
) -> None:
    # GIVEN a Price List with no us-west-2 product for zz1.xlarge, and zz1.2xlarge sold on
    # other terms only (no on-demand rate)
    out = tmp_path / "prices.json"
    out.write_text(FIXTURE_CATALOG_PATH.read_text())
    env = {"AWS_ENDPOINT_URL": fake.url}
    # WHEN the catalog is refreshed for us-west-2
    done = costguard(
        "prices", "refresh", "--region", "us-west-2", "--out", str(out), at=AT, env=env
    )
    assert done.returncode == 0, done.stderr
    # THEN the refresh's summary lists them
    summary = json.loads(done.stdout)
    assert (
        "ec2/us-west-2/zz1.xlarge: not offered in us-west-2 (no EC2 product in the Price List)"
        in summary["without_a_rate"]
    )
    # AND show gives each missing rate the reason the Price List gave, and its date
    shown = json.loads(
        show("--region", "us-west-2", "--service", "ec2", "--json", catalog=out).stdout
    )
    rates = {r["name"]: r for r in shown["data"]["rates"]}
    assert rates["zz1.xlarge"]["reason"] == (
        "not offered in us-west-2 (no EC2 product in the Price List) "
        "(Price List API, since 2026-11-08)"
    )
    assert rates["zz1.xlarge"]["source"] == "price-list-api"
    assert rates["zz1.2xlarge"]["reason"].startswith(
        "no on-demand rate in the Price List for us-west-2"
    )
    # AND a type the API priced shows the API as its source
    assert rates["g5.xlarge"]["source"] == "price-list-api" and rates["g5.xlarge"]["priced"]


def test_odd_names_inside_a_catalog_stay_on_their_row(tmp_path: Path) -> None:
    # GIVEN a hand-edited catalog whose names carry a newline, a pipe and an escape
    data = json.loads(FIXTURE_CATALOG_PATH.read_text())
    data["ec2"]["us-east-1"]["g5.x|large\nnext\x1b[2J"] = "1.5"
    catalog = tmp_path / "odd.json"
    catalog.write_text(json.dumps(data))
    for fmt in ("table", "markdown"):
        # WHEN it is shown for a person or pasted into a pull request
        done = show("--region", "us-east-1", "--type", "g5", "--format", fmt, catalog=catalog)
        assert done.returncode == 0, done.stderr
        # THEN each rate is one line, and no escape reaches the terminal
        assert "\x1b" not in done.stdout
        rows = [line for line in done.stdout.splitlines() if line.lstrip("| ").startswith("ec2")]
        assert len(rows) == 4  # g5.xlarge, g5.2xlarge, g5.12xlarge and the odd one
        assert any("g5.x" in row and "next" in row for row in rows)
    # AND the JSON keeps the name exactly, for a script
    doc = json.loads(
        show("--region", "us-east-1", "--type", "g5", "--json", catalog=catalog).stdout
    )
    assert "g5.x|large\nnext\x1b[2J" in {r["name"] for r in doc["data"]["rates"]}


def test_an_estimate_for_a_type_without_a_rate_gives_the_same_reason() -> None:
    # GIVEN a type the catalog prices in us-east-1 only
    done = costguard(
        "estimate", "iteration", "--work-hours", "2", "--instance-type", "g5.2xlarge",
        "--region", "eu-west-1", "--catalog", str(FIXTURE_CATALOG_PATH), at=AT,
    )  # fmt: skip
    # THEN the estimate says why there is no rate, as `prices show` does, not only that
    assert done.returncode == 2
    assert "the price catalog prices EC2 g5.2xlarge in us-east-1 only" in done.stderr


def test_storage_rates_are_listed_with_their_source_after_a_refresh(tmp_path: Path) -> None:
    # GIVEN the packaged catalog refreshed for us-east-1 against a Price List that lists
    # its storage rates as AWS does, gp3 throughput at $40.96 per GiBps-month ($0.04 per
    # MiB/s-month)
    fake = FakePriceList(regions=frozenset({"us-east-1"}))
    out = tmp_path / "prices.json"
    with price_list_server(fake):
        done = costguard(
            "prices", "refresh", "--region", "us-east-1", "--out", str(out),
            at=AT, env={"AWS_ENDPOINT_URL": fake.url},
        )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    # WHEN a user shows the storage rates of us-east-1 and of eu-west-1 (not refreshed)
    args = ("--service", "ebs", "--service", "ebs-snapshot", "--service", "s3")
    doc = json.loads(show(*args, "--json", catalog=out).stdout)
    rates = {(r["region"], r["name"]): r for r in doc["data"]["rates"]}
    # THEN each storage rate says where it came from: read from the API where refreshed,
    # the package's reference rate elsewhere, under a name a person reads
    east = rates[("us-east-1", "gp3 throughput above 125 MiB/s")]
    assert (east["usd"], east["unit"], east["source"]) == ("0.04", "MiB/s-month", "price-list-api")
    assert east["key"] == "gp3/throughput_mibps/125"
    west = rates[("eu-west-1", "io2 IOPS above 64,000")]
    assert (west["usd"], west["source"], west["key"]) == ("0.03528", "bundled", "io2/iops/64000")
    assert rates[("us-east-1", "io2 IOPS 32,001 to 64,000")]["usd"] == "0.0455"
    assert rates[("us-east-1", "standard tier")]["source"] == "price-list-api"
    assert rates[("us-east-1", "Glacier Deep Archive")]["usd"] == "0.00099"
    # AND the text is one aligned table: every row's rate ends in the same column, and no
    # catalog key (io2/iops/..., standard_ia) reaches a person
    text = show(*args, "--region", "us-east-1", catalog=out).stdout
    lines = text.splitlines()[1:]
    header = lines[0]
    rate_end = header.index("rate") + len("rate")
    assert all(line[rate_end - 1] != " " for line in lines[1:]), text
    assert "/iops/" not in text and "standard_ia" not in text and "_month" not in text
    assert "ebs           us-east-1  io2 IOPS up to 32,000" in text
