"""`costguard prices refresh` as a user runs it: a subprocess, boto3 over HTTP to a fake
Price List API (moto has none), the catalog written where --out says."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest

from costguard.adapters.catalog import bundled_catalog_path, read_catalog_file
from tests.support.cli import Done
from tests.support.cli import costguard as in_process
from tests.support.clock import costguard_at
from tests.support.fake_price_list import FakePriceList, price_list_server

pytestmark = pytest.mark.e2e

#: A refresh runs after the release it refreshes: a week after the bundled catalog's date,
#: whatever the wall clock reads (the story would change if "today" fell before it).
TODAY = datetime.combine(
    read_catalog_file(bundled_catalog_path()).as_of + timedelta(days=7), time(14), UTC
)


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A scan reads the catalog `prices refresh` left in the user's data dir: not the real one."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


@pytest.fixture
def fake() -> Iterator[FakePriceList]:
    fake = FakePriceList()
    with price_list_server(fake):
        yield fake


ALL_REGIONS = ("--region", "us-east-1", "--region", "us-west-2", "--region", "eu-west-1")


def refresh(fake: FakePriceList, *args: str, **env: str) -> Done:
    return costguard(fake, "prices", "refresh", *args, **env)


def costguard(fake: FakePriceList, *args: str, **env: str) -> Done:
    """``costguard *args`` against the fake API, in this process (tests/support/cli.py): the
    entry point's child process is proven by the first test and the SIGPIPE one."""
    return in_process(*args, at=TODAY, env={"AWS_ENDPOINT_URL": fake.url, **env})


def in_a_child(fake: FakePriceList, *args: str) -> subprocess.CompletedProcess[str]:
    """``costguard *args`` in a child process, as a user runs it."""
    return subprocess.run(
        [*costguard_at(TODAY), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "AWS_ENDPOINT_URL": fake.url},
        timeout=120,
        check=False,
    )


def last_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    return stderr.strip().splitlines()[-1]


def test_writes_a_fresh_catalog_where_out_says(fake: FakePriceList, tmp_path: Path) -> None:
    out = tmp_path / "prices.json"
    done = in_a_child(fake, "prices", "refresh", *ALL_REGIONS, "--out", str(out))
    assert done.returncode == 0, done.stderr
    catalog = read_catalog_file(out)
    assert catalog.as_of == TODAY.date()
    summary = json.loads(done.stdout)
    # (moved unless the packaged catalog is itself dated today)
    bundled = read_catalog_file().as_of
    assert summary["as_of_moved"] is (bundled < catalog.as_of)
    assert summary["output"] == str(out)
    assert f"refreshing the price catalog at {out}" in done.stderr
    assert last_line(done.stderr) == (
        f"costguard: wrote {out}: version {catalog.version}, as of {catalog.as_of}"
    )


def test_a_region_without_prices_leaves_the_catalog_unfresh_and_exits_3(
    fake: FakePriceList, tmp_path: Path
) -> None:
    # GIVEN a typo among the regions: the API answers it with no products, not an error
    previous = read_catalog_file()
    out = tmp_path / "prices.json"
    # WHEN the catalog is refreshed
    done = refresh(fake, "--region", "us-east-1", "--region", "ap-south-2", "--out", str(out))
    # THEN the good region is written but as_of stays, and the command says why and fails
    assert done.returncode == 3, done.stderr
    assert read_catalog_file(out).as_of == previous.as_of
    summary = json.loads(done.stdout)
    assert summary["regions_without_prices"] == ["ap-south-2"]
    line = last_line(done.stderr)
    assert "no prices returned for ap-south-2" in line
    assert f"as_of stays {previous.as_of}" in line


def test_expired_credentials_are_one_line_and_write_nothing(
    fake: FakePriceList, tmp_path: Path
) -> None:
    fake.reject_with = "ExpiredTokenException"
    out = tmp_path / "prices.json"
    done = refresh(fake, "--region", "us-east-1", "--out", str(out))
    assert done.returncode == 1
    line = last_line(done.stderr)
    assert line.startswith("costguard: AWS rejected the credentials (ExpiredTokenException")
    assert not out.exists()


@pytest.mark.parametrize("where", ["missing/prices.json", "."])
def test_an_unwritable_out_fails_before_any_request(
    fake: FakePriceList, tmp_path: Path, where: str
) -> None:
    done = refresh(fake, "--region", "us-east-1", "--out", str(tmp_path / where))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("costguard: --out")
    assert fake.requests == []


def test_an_out_that_is_a_pipe_is_refused_and_left_a_pipe(
    fake: FakePriceList, tmp_path: Path
) -> None:
    """Defect: the catalog is written beside --out and moved over it: a named pipe or a
    device (``--out /dev/full`` as root) would be replaced by a regular file.

    GIVEN a named pipe as --out, WHEN a refresh runs, THEN it is bad input before any
    request, and the pipe is still a pipe."""
    import os
    import stat

    fifo = tmp_path / "prices.fifo"
    os.mkfifo(fifo)
    done = refresh(fake, "--region", "us-east-1", "--out", str(fifo))
    assert done.returncode == 2, done.stderr
    assert "is not a regular file" in done.stderr
    assert fake.requests == []
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_reader_that_goes_away_is_not_a_traceback(fake: FakePriceList, tmp_path: Path) -> None:
    # GIVEN `costguard prices refresh | head -c0`: the reader has gone before anything is printed
    proc = subprocess.Popen(
        [
            *costguard_at(TODAY),
            *("prices", "refresh"),
            *("--region", "us-east-1", "--out", str(tmp_path / "prices.json")),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "AWS_ENDPOINT_URL": fake.url},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    # WHEN it prints its summary, THEN it stops quietly with the shell's code for SIGPIPE
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert (tmp_path / "prices.json").exists()  # the work itself was done


# -- the default output: the user's data directory, never the installed package -------------


def test_refresh_writes_to_the_user_data_dir_and_never_into_the_package(
    fake: FakePriceList, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.adapters.catalog import bundled_catalog_path

    # GIVEN no --out, and no XDG_DATA_HOME: the home directory's ~/.local/share
    monkeypatch.delenv("XDG_DATA_HOME")
    home = Path(os.environ["HOME"])
    packaged = bundled_catalog_path()
    before = (packaged.read_bytes(), packaged.stat().st_mtime_ns)
    # WHEN the catalog is refreshed
    done = refresh(fake, *ALL_REGIONS)
    # THEN it lands in ~/.local/share/costguard (made for it), and the package is untouched
    assert done.returncode == 0, done.stderr
    out = home / ".local" / "share" / "costguard" / "prices.json"
    assert json.loads(done.stdout)["output"] == str(out)
    assert read_catalog_file(out).as_of == TODAY.date()
    assert (packaged.read_bytes(), packaged.stat().st_mtime_ns) == before
    assert last_line(done.stderr) == (
        f"costguard: wrote {out}: version {read_catalog_file(out).version}, as of {TODAY.date()}"
    )


def test_refresh_honours_xdg_data_home_and_quiet(fake: FakePriceList, tmp_path: Path) -> None:
    # GIVEN XDG_DATA_HOME (set by the autouse fixture) and --quiet
    # WHEN the catalog is refreshed
    done = refresh(fake, "--region", "us-east-1", "--quiet")
    # THEN it is written under XDG_DATA_HOME, the summary is on stdout, and stderr is silent
    assert done.returncode == 0, done.stderr
    out = Path(os.environ["XDG_DATA_HOME"]) / "costguard" / "prices.json"
    assert json.loads(done.stdout)["output"] == str(out) and out.is_file()
    assert done.stderr == ""


def test_quiet_still_says_why_a_refresh_exits_3(fake: FakePriceList) -> None:
    done = refresh(fake, "--region", "ap-south-2", "--quiet")
    assert done.returncode == 3
    (line,) = done.stderr.strip().splitlines()
    assert "no prices returned for ap-south-2" in line


def test_a_data_dir_that_cannot_be_made_fails_before_any_request(
    fake: FakePriceList, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN XDG_DATA_HOME is a file, so costguard/ cannot be made under it (root or not)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    # WHEN the catalog is refreshed to its default place
    done = refresh(fake, "--region", "us-east-1")
    # THEN it is bad input, said once with the way out, and the API was never asked
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"costguard: cannot create {blocker / 'costguard'}") and "--out" in line
    assert fake.requests == []


# -- never into the package; a deployed guard's store; what the guard uses ------------------


@pytest.mark.parametrize("inside", ["data/prices.json", "data/new.json", "."])
def test_refuses_to_write_inside_the_installed_package(
    fake: FakePriceList, tmp_path: Path, inside: str
) -> None:
    from costguard.adapters.catalog import bundled_catalog_path

    package = bundled_catalog_path().parent.parent
    before = bundled_catalog_path().read_bytes()
    # GIVEN --out names the package's own catalog, a new file there, or the package itself
    # (also through a symlink from somewhere harmless-looking)
    link = tmp_path / "harmless"
    link.symlink_to(package)
    for out in (package / inside, link / inside):
        done = refresh(fake, "--region", "us-east-1", "--out", str(out))
        # THEN it is bad input, said once, before any request, and nothing is written
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert "inside the installed costguard package" in line and "--table" in line
    assert fake.requests == []
    assert bundled_catalog_path().read_bytes() == before
    assert not (package / "data" / "new.json").exists()


def test_show_prints_each_rate_and_where_it_came_from(fake: FakePriceList, tmp_path: Path) -> None:
    # GIVEN a catalog refreshed for us-east-1, where the API no longer returns p3.2xlarge
    out = tmp_path / "prices.json"
    fake.scale = "1.01"
    assert refresh(fake, "--region", "us-east-1", "--out", str(out)).returncode == 0
    # WHEN the user asks which rates the g5 family uses
    done = costguard(fake, "prices", "show", "--catalog", str(out), "--type", "g5", "--json")
    # THEN each rate says its source and date: read from the API in us-east-1, bundled elsewhere
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["data"]
    east = {r["name"]: r for r in shown["rates"] if r["region"] == "us-east-1"}
    west = {r["name"]: r for r in shown["rates"] if r["region"] == "us-west-2"}
    today = TODAY.date().isoformat()
    assert (east["g5.xlarge"]["source"], east["g5.xlarge"]["as_of"]) == ("price-list-api", today)
    assert west["g5.xlarge"]["source"] == "bundled"
    assert {r["name"].removeprefix("ml.").split(".")[0] for r in shown["rates"]} == {"g5"}
    # AND as text, one line a rate, with the region filter
    text = costguard(
        fake,
        "prices",
        "show",
        "--catalog",
        str(out),
        "--type",
        "g5.xlarge",
        "--region",
        "us-east-1",
    )
    assert text.returncode == 0, text.stderr
    lines = text.stdout.strip().splitlines()
    assert lines[0].startswith(f"Prices from {out}")
    assert lines[1].split()[:3] == ["service", "region", "name"]  # the columns' header
    assert any("g5.xlarge" in line and "price-list-api" in line for line in lines[2:])
    assert all("us-east-1" in line for line in lines[2:])


def test_show_of_a_table_with_nothing_stored_never_says_the_bundled_catalog_is_in_it(
    fake: FakePriceList, moto_server: str
) -> None:
    """Defect: ``prices show --table ledger`` over a table with no stored catalog said
    "Prices from the bundled catalog v3, as of ... in table ledger": the bundled catalog is
    in the package, not the table.

    GIVEN a ledger table with no stored catalog, WHEN its prices are shown, THEN the first
    line names the bundled catalog and the guard of the table, never "in table"."""
    import boto3

    from costguard_demo.plumbing import create_ledger_table

    aws = moto_server
    create_ledger_table(boto3.Session(), "ledger", "us-east-1")
    shown = costguard(
        fake, "prices", "show", "--table", "ledger", "--table-region", "us-east-1",
        "--type", "g5.xlarge", "--region", "us-east-1",
        AWS_ENDPOINT_URL_DYNAMODB=aws,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith("Prices from the bundled catalog") and "in table" not in first
    assert "(what the guard of table ledger uses)" in first


def test_show_of_a_type_the_catalog_lacks_is_named_and_exits_2(fake: FakePriceList) -> None:
    done = costguard(fake, "prices", "show", "--type", "zz9.huge")
    assert done.returncode == 2
    assert "--type zz9.huge: the price catalog knows no such type" in done.stderr


def test_refresh_and_show_a_deployed_guards_stored_catalog(
    fake: FakePriceList, moto_server: str
) -> None:
    import boto3

    from costguard_demo.plumbing import create_ledger_table

    aws = moto_server
    create_ledger_table(boto3.Session(), "ledger", "us-east-1")
    env = {"AWS_ENDPOINT_URL_DYNAMODB": aws}
    # WHEN the user refreshes the deployed store, as the weekly Lambda does
    done = refresh(fake, *ALL_REGIONS, "--table", "ledger", "--table-region", "us-east-1", **env)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["written"] and summary["table"] == "ledger"
    # THEN the guard's rates are the stored ones, and show says so
    shown = costguard(
        fake, "prices", "show", "--table", "ledger", "--table-region", "us-east-1",
        "--type", "p5.48xlarge", "--region", "us-east-1", "--json", **env,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)["data"]
    assert body["catalog"].startswith(f"prices from the stored catalog v{summary['version']}")
    assert body["catalog"].endswith("(what the guard of table ledger uses)")
    ((rate,),) = [[r for r in body["rates"] if r["service"] == "ec2"]]
    assert rate["source"] == "price-list-api"
    # AND a second refresh the same day stores nothing new: the same prices, same date
    again = refresh(fake, *ALL_REGIONS, "--table", "ledger", "--table-region", "us-east-1", **env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["written"] is False


@pytest.mark.parametrize("version", ["4", None], ids=["corrupt-data", "no-version"])
def test_a_corrupt_stored_catalog_is_repaired_by_refresh_table_or_one_line(
    fake: FakePriceList, version: str | None, moto_server: str
) -> None:
    import boto3

    from costguard_demo.plumbing import create_ledger_table

    aws = moto_server
    create_ledger_table(boto3.Session(), "ledger", "us-east-1")
    # GIVEN a stored CURRENT item whose data is not zlib/JSON (and maybe no version)
    item = {
        "pk": {"S": "CATALOG"},
        "sk": {"S": "CURRENT"},
        "stored_at": {"S": "2026-11-13T12:00:00.000000Z"},
        "data": {"B": b"x\x9c\xab\xaeTruncated"},
        **({"version": {"N": version}} if version else {}),
    }
    boto3.client("dynamodb", region_name="us-east-1", endpoint_url=aws).put_item(
        TableName="ledger", Item=item
    )
    env = {"AWS_ENDPOINT_URL_DYNAMODB": aws}
    # WHEN the user refreshes the deployed store
    done = refresh(fake, *ALL_REGIONS, "--table", "ledger", "--table-region", "us-east-1", **env)
    # THEN a readable version is replaced (the repair) and said; else one line, exit 1
    if version:
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["written"] and summary["version"] == 5
        assert "not readable" in summary["stored_catalog_problem"]
        assert "started from the packaged catalog" in done.stderr
    else:
        assert done.returncode == 1
        assert "CURRENT is malformed" in last_line(done.stderr)
