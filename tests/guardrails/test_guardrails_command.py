"""``costguard guardrails`` as a user runs it: the envelope, the file, the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import costguard
from tests.support.clock import MIDDAY

CI = "arn:aws:iam::123456789012:role/ci-deploy"


def test_json_is_the_envelope_with_the_policy() -> None:
    """GIVEN --org --format json THEN one envelope of kind guardrails holding the SCP."""
    done = costguard("guardrails", "--org", "--format", "json", "--quiet", at=MIDDAY)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kind"] == "guardrails"
    data = doc["data"]
    assert data["target"] == "scp" and data["limit_chars"] == 5120
    assert data["policy"]["Version"] == "2012-10-17"
    sids = [s["Sid"] for s in data["policy"]["Statement"]]
    assert "DenyUntaggedAcceleratorInstances" in sids and "AllowWithinBoundary" not in sids
    assert "p5" in data["families"] and "g4ad" in data["families"]


def test_out_writes_the_bare_document(tmp_path: Path) -> None:
    """GIVEN --out FILE THEN FILE holds the compact policy itself (what create-policy
    --content file://FILE takes), not the envelope; the table names the file."""
    out = tmp_path / "boundary.json"
    done = costguard("guardrails", "--exempt-role", CI, "--out", str(out), "--quiet", at=MIDDAY)
    assert done.returncode == 0, done.stderr
    policy = json.loads(out.read_text())
    assert set(policy) == {"Version", "Statement"}
    assert policy["Statement"][0]["Sid"] == "AllowWithinBoundary"
    assert out.read_text().strip() == json.dumps(policy, separators=(",", ":"))
    assert "IAM permissions boundary policy" in done.stdout and str(out) in done.stdout
    assert CI in done.stdout


def test_a_ceiling_below_every_rate_still_fits() -> None:
    """GIVEN a ceiling below every rate THEN every family is one wildcard and the SCP fits."""
    done = costguard(
        "guardrails", "--org", "--max-usd-per-hour", "0.01", "--json", "--quiet", at=MIDDAY
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["data"]
    assert all(p.endswith(".*") for p in data["over_ceiling"]["ec2"])
    assert data["size_chars"] <= 5120


def test_ceiling_lists_what_it_refuses() -> None:
    """GIVEN --max-usd-per-hour 20 THEN the p5 and p4d types are listed above it, and the
    types with no on-demand rate are named as not capped."""
    done = costguard(
        "guardrails", "--org", "--max-usd-per-hour", "20", "--json", "--quiet", at=MIDDAY
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["data"]
    assert "p4d.*" in data["over_ceiling"]["ec2"] and "p5.48xlarge" in data["over_ceiling"]["ec2"]
    assert "ml.p5.*" in data["over_ceiling"]["sagemaker"]
    assert "ml.t3.*" not in data["over_ceiling"]["sagemaker"]
    assert "p5e.48xlarge" in data["unpriced_not_capped"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--exempt-role", "not-an-arn"], "not an IAM role ARN"),
        (["--exempt-role", "arn:aws:iam::123456789012:user/alice"], "not an IAM role ARN"),
        (["--max-usd-per-hour", "-5"], "not a $/h amount"),
        (["--max-usd-per-hour", "0"], "above 0"),
        (["--max-usd-per-hour", "nan"], "not a $/h amount"),
        (
            [
                "--org",
                *(f"--exempt-role=arn:aws:iam::123456789012:role/ci-{n}" for n in range(9)),
            ],
            "over AWS's limit of 5,120",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], said: str) -> None:
    """GIVEN a bad ARN, a ceiling that is not a positive amount, or a ceiling so low the
    SCP would exceed 5,120 characters THEN exit 2, one clear line, no traceback, no policy."""
    done = costguard("guardrails", *argv, "--quiet", at=MIDDAY)
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_every_format_prints_one_row_per_statement(fmt: str) -> None:
    """GIVEN each format THEN every statement's Sid is printed."""
    done = costguard("guardrails", "--org", "--format", fmt, "--quiet", at=MIDDAY)
    assert done.returncode == 0, done.stderr
    for sid in (
        "DenyUntaggedAcceleratorInstances",
        "DenyRemovingProjectTag",
        "DenyUntaggedEndpoints",
    ):
        assert sid in done.stdout


def test_out_into_a_directory_is_bad_input(tmp_path: Path) -> None:
    """GIVEN --out naming a directory THEN exit 2 with the reason, no traceback."""
    done = costguard("guardrails", "--out", str(tmp_path), "--quiet", at=MIDDAY)
    assert done.returncode == 2
    assert "cannot write the policy to" in done.stderr and "Traceback" not in done.stderr
