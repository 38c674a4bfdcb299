"""`costguard scan --json` as a user runs it: boto3 over HTTP to moto's server.

The first test runs the command in a child process, as a user does; the others call the
same ``main`` in this process (tests/support/cli.py), which proves the same for less."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from costguard_demo.fleet import backdate_instances, backdate_sagemaker, install_spot_prices
from tests.support.cli import Done, costguard
from tests.support.clock import MIDDAY, costguard_at

pytestmark = pytest.mark.e2e
ROLE = "arn:aws:iam::123456789012:role/x"
CATALOG = {
    "p5.48xlarge": Decimal("55.04"),
    "g5.xlarge": Decimal("1.006"),
    "ml.p3.2xlarge": Decimal("3.825"),
}
GP2_PER_GB_MONTH = {"gp2": Decimal("0.10"), "gp3": Decimal("0.08")}


@pytest.fixture(autouse=True)
def _own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """A scan reads the catalog `prices refresh` left in the user's data dir: not the real one."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


@pytest.fixture
def server(moto_server: str) -> str:
    """The worker's moto server, reset to an empty AWS."""
    return moto_server


def _tags(**tags: str) -> list[dict[str, Any]]:
    return [
        {
            "ResourceType": "instance",
            "Tags": [{"Key": k.replace("__", ":"), "Value": v} for k, v in tags.items()],
        }
    ]


def seed(now: datetime) -> dict[str, str]:
    import boto3

    session = boto3.Session()
    ec2 = session.client("ec2", region_name="us-east-1")
    run = {
        "ImageId": "ami-12345678",
        "MinCount": 1,
        "MaxCount": 1,
        "Placement": {"AvailabilityZone": "us-east-1a"},
    }
    p5 = ec2.run_instances(
        InstanceType="p5.48xlarge",
        TagSpecifications=_tags(costguard__project="llm", costguard__budget="$500"),
        **run,
    )["Instances"][0]["InstanceId"]
    p4d = ec2.run_instances(
        InstanceType="p4d.24xlarge",
        InstanceMarketOptions={"MarketType": "spot"},
        TagSpecifications=_tags(costguard__project="llm"),
        **run,
    )["Instances"][0]["InstanceId"]
    g5 = ec2.run_instances(InstanceType="g5.xlarge", **run)["Instances"][0]["InstanceId"]
    bad = ec2.run_instances(
        InstanceType="g5.xlarge",
        TagSpecifications=_tags(costguard__project="cv", costguard__budget="abc"),
        **run,
    )["Instances"][0]["InstanceId"]
    ec2.run_instances(
        InstanceType="m5.large", TagSpecifications=_tags(costguard__project="llm"), **run
    )
    sm = session.client("sagemaker", region_name="us-east-1")
    sm.create_notebook_instance(
        NotebookInstanceName="nb",
        InstanceType="ml.p3.2xlarge",
        RoleArn=ROLE,
        Tags=[{"Key": "costguard:project", "Value": "cv"}],
    )
    backdate_instances(
        "us-east-1",
        {
            p5: now - timedelta(hours=10),
            p4d: now - timedelta(hours=4),
            g5: now - timedelta(hours=2),
            bad: now - timedelta(hours=1),
        },
    )
    backdate_sagemaker("us-east-1", {"nb": now - timedelta(hours=3)}, {})
    install_spot_prices({("us-east-1a", "p4d.24xlarge"): Decimal("9.8814")}, now)
    return {"p5": p5, "p4d": p4d, "g5": g5, "bad": bad}


SCAN_JSON = ("scan", "--json", "--region", "us-east-1", "--sagemaker-tags", "per-resource")


def scan_json(*extra: str, child: bool = False) -> dict[str, Any]:
    """`costguard scan --json ...`: in a child process (``child``), or in this one."""
    done: Any
    if child:
        done = subprocess.run(
            [*costguard_at(MIDDAY), *SCAN_JSON, *extra],
            capture_output=True,
            text=True,
            env={**os.environ, "COSTGUARD_SAGEMAKER_STUDIO": "false"},
            timeout=120,
            check=False,
        )
    else:
        done = costguard(*SCAN_JSON, *extra, at=MIDDAY, env={"COSTGUARD_SAGEMAKER_STUDIO": "false"})
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    assert (document["schema_version"], document["kind"]) == (2, "scan")
    result: dict[str, Any] = document["data"]
    return result


def test_scan_json_matches_hand_computed_prices(server: str) -> None:
    # GIVEN a fleet launched 10 h, 4 h, 2 h and 1 h before the scan
    now = MIDDAY
    ids = seed(now)
    # WHEN a user runs `costguard scan --json` (the installed command's process)
    report = scan_json(child=True)
    scanned = datetime.fromisoformat(report["scanned_at"])
    projects = {p["project"]: p for p in report["projects"]}
    llm, cv = projects["llm"], projects["cv"]
    by_id = {r["id"]: r for r in llm["resources"]}

    # THEN every rate is the list price, spot is the AZ's spot price, CPU boxes are out of scope
    assert by_id[ids["p5"]]["usd_per_hour"] == 55.04
    assert by_id[ids["p4d"]]["usd_per_hour"] == 9.8814
    assert by_id[ids["p4d"]]["lifecycle"] == "spot"
    assert {r["instance_type"] for r in llm["resources"] if r["kind"] == "ec2-instance"} == {
        "p5.48xlarge",
        "p4d.24xlarge",
    }

    # AND the project numbers are what a person computes by hand
    def hours(since: timedelta) -> Decimal:
        return Decimal(str((scanned - (now - since)).total_seconds())) / 3600

    volumes = [r for r in llm["resources"] if r["kind"] == "ebs-volume"]
    vol_rate = sum(
        GP2_PER_GB_MONTH[v["volume"]["type"]] * v["volume"]["size_gib"] / 730 for v in volumes
    )
    assert llm["run_rate_usd_per_hour"] == pytest.approx(
        float(Decimal("55.04") + Decimal("9.8814") + vol_rate), abs=1e-4
    )
    expected_mtd = Decimal("55.04") * hours(timedelta(hours=10)) + Decimal("9.8814") * hours(
        timedelta(hours=4)
    )
    assert llm["month_to_date_usd"] == pytest.approx(float(expected_mtd), abs=0.05)
    left = (
        Decimal(
            str(
                (
                    (
                        scanned.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
                        + timedelta(days=32)
                    ).replace(day=1)
                    - scanned
                ).total_seconds()
            )
        )
        / 3600
    )
    assert llm["forecast_month_usd"] == pytest.approx(
        llm["month_to_date_usd"] + llm["run_rate_usd_per_hour"] * float(left), rel=1e-3
    )
    assert llm["budget_usd"] == 500.0
    assert llm["status"] == "over"

    assert cv["budget_usd"] is None  # "abc" is not a budget ...
    assert cv["month_to_date_usd"] == pytest.approx(
        float(
            Decimal("1.006") * hours(timedelta(hours=1))
            + Decimal("3.825") * hours(timedelta(hours=3))
        ),
        abs=0.05,
    )
    findings = {(f["code"], f["resource"]) for f in report["findings"]}
    assert (
        "malformed-budget",
        f"us-east-1/ec2-instance/{ids['bad']}",
    ) in findings  # ... it is a finding
    assert ("unattributed", f"us-east-1/ec2-instance/{ids['g5']}") in findings
    assert [
        r["id"] for r in report["unattributed"]["resources"] if r["kind"] == "ec2-instance"
    ] == [ids["g5"]]
    assert report["cost_of_scan"]["api_calls_total"] > 0


def test_scan_table_output_is_readable(server: str) -> None:
    seed(MIDDAY)
    done = costguard(
        "scan",
        "--region",
        "us-east-1",
        "--sagemaker-tags",
        "per-resource",
        at=MIDDAY,
        env={"COSTGUARD_SAGEMAKER_STUDIO": "false"},
    )
    assert done.returncode == 0, done.stderr
    assert "llm" in done.stdout and "over" in done.stdout
    assert "malformed-budget" in done.stdout
    assert "costguard:" in done.stderr  # progress goes to stderr


def test_bad_region_is_a_clear_error_not_a_traceback(server: str) -> None:
    done = costguard("scan", "--region", "mars-1", at=MIDDAY)
    assert done.returncode == 2
    assert "mars-1" in done.stderr
    assert "Traceback" not in done.stderr


def test_scan_with_a_table_reads_the_ledger_and_never_writes_it(server: str) -> None:
    import boto3

    from costguard.adapters.dynamodb import DynamoDbLedger
    from costguard.domain.spend import Increment
    from costguard.ports import ScanCommit
    from costguard_demo.plumbing import create_ledger_table

    now = MIDDAY
    seed(now)
    session = boto3.Session()
    create_ledger_table(session, "ledger", "us-east-1")
    ledger = DynamoDbLedger(session.client("dynamodb", region_name="us-east-1"), "ledger")
    month = f"{now:%Y-%m}"
    earlier = now - timedelta(minutes=1)
    account = "123456789012"  # moto's; the deployed scan keys the ledger by account id
    increments = {("llm", month): Increment(Decimal(1000), Decimal(0))}
    ledger.commit(ScanCommit(account, None, earlier, increments, []))
    before = ledger.month_totals(account, month)

    report = scan_json("--table", "ledger")

    llm = next(p for p in report["projects"] if p["project"] == "llm")
    assert llm["month_to_date_usd"] > 1000  # the ledger's $1,000 plus this scan's back-fill
    assert ledger.watermark(account) == earlier, "a local scan must not move the ledger"
    assert ledger.month_totals(account, month) == before


def _user_keys(name: str, actions: list[str]) -> dict[str, str]:
    """An IAM user allowed ``actions`` only; its keys, as environment variables."""
    import boto3

    iam = boto3.client("iam")
    iam.create_user(UserName=name)
    if actions:
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
        }
        iam.put_user_policy(UserName=name, PolicyName="scan", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
    }


@pytest.fixture
def iam_enforced(server: str) -> Iterator[str]:
    """The server; a test turns on IAM checks with :func:`enforce_iam`, and they end with it."""
    yield server
    _reset_auth(server, b"inf")  # moto's settings are process-wide: off again for the rest


def _reset_auth(server: str, count: bytes) -> None:
    import urllib.request

    request = urllib.request.Request(  # noqa: S310 - loopback http
        f"{server}/moto-api/reset-auth",
        data=count,
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    urllib.request.urlopen(request, timeout=10).close()  # noqa: S310


def enforce_iam(server: str) -> None:
    """From the next call on, moto checks each call against the caller's IAM policy."""
    _reset_auth(server, b"0")


def run_as(keys: dict[str, str], *args: str) -> Done:
    env: dict[str, str | None] = {"AWS_SESSION_TOKEN": None, **keys}
    return costguard(*args, at=MIDDAY, env={**env, "COSTGUARD_SAGEMAKER_STUDIO": "false"})


def test_exits_3_when_every_source_failed_and_names_them(iam_enforced: str) -> None:
    # GIVEN credentials that may call nothing at all
    seed(MIDDAY)
    keys = _user_keys("nothing", [])
    enforce_iam(iam_enforced)
    # WHEN they scan
    done = run_as(
        keys, "scan", "--json", "--region", "us-east-1", "--sagemaker-tags", "per-resource"
    )
    # THEN the empty report is not passed off as an empty account
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)["data"]
    failed = {f["resource"] for f in report["findings"] if f["code"] == "scan-failed"}
    assert {"us-east-1/ec2", "us-east-1/eks"} <= failed
    assert any(r.startswith("us-east-1/sagemaker") for r in failed)
    assert report["projects"] == [] and report["unattributed"]["resources"] == []
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("costguard: every source failed") and "us-east-1/ec2" in line
    assert "AWS answered" in line and "AccessDenied" in line
    assert "Traceback" not in done.stderr


def test_a_partial_failure_exits_0_and_says_what_is_missing(iam_enforced: str) -> None:
    # GIVEN credentials that may read EC2 but not EKS or SageMaker
    ids = seed(MIDDAY)
    keys = _user_keys("ec2-only", ["ec2:Describe*"])
    enforce_iam(iam_enforced)
    # WHEN they scan
    done = run_as(
        keys, "scan", "--json", "--region", "us-east-1", "--sagemaker-tags", "per-resource"
    )
    # THEN what could be read is reported, and what could not is a finding and a warning
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["data"]
    llm = next(p for p in report["projects"] if p["project"] == "llm")
    assert ids["p5"] in {r["id"] for r in llm["resources"]}
    failed = {f["resource"] for f in report["findings"] if f["code"] == "scan-failed"}
    assert "us-east-1/eks" in failed and "us-east-1/ec2" not in failed
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("costguard: warning:") and "us-east-1/eks" in line


def test_rejected_credentials_for_the_account_lookup_say_how_to_skip_it(iam_enforced: str) -> None:
    # GIVEN keys AWS does not know (e.g. deleted), and a --table without --scope
    enforce_iam(iam_enforced)
    keys = {"AWS_ACCESS_KEY_ID": "AKIAUNKNOWNKEY000000", "AWS_SECRET_ACCESS_KEY": "x"}
    # WHEN the scan looks the account up to key the ledger
    done = run_as(keys, "scan", "--region", "us-east-1", "--table", "ledger")
    # THEN one line says the credentials were rejected, and how to avoid the lookup
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert "GetCallerIdentity" in line or "credentials" in line
    assert "--scope" in line
