"""How a finished `costguard scan` exits: 3 only when nothing at all was read."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from costguard.cli.common import EXIT_NO_DATA, EXIT_OK
from costguard.cli.scan import InventoryCalls, scan_outcome
from costguard.domain.findings import Finding, FindingCode, Severity


def failed(resource: str, severity: Severity = Severity.ERROR) -> Finding:
    return Finding(FindingCode.SCAN_FAILED, resource, "x failed with AccessDenied", severity)


def report(*findings: Finding) -> Any:
    return SimpleNamespace(findings=findings)


def calls(succeeded: int = 0, **codes: int) -> InventoryCalls:
    outcome = InventoryCalls()
    outcome.succeeded = succeeded
    outcome.error_codes.update(codes)
    return outcome


def test_a_clean_scan_exits_0_silently() -> None:
    assert scan_outcome(report(), calls(succeeded=3)) == (EXIT_OK, None)


def test_an_empty_account_is_not_a_failure() -> None:
    # Every call succeeded and found nothing: a quiet account, not a broken scan.
    assert scan_outcome(report(), calls(succeeded=5)) == (EXIT_OK, None)


def test_exits_3_when_every_source_failed_and_lists_them_with_the_codes() -> None:
    code, line = scan_outcome(
        report(failed("us-east-1/ec2"), failed("us-east-1/eks")), calls(AccessDenied=2)
    )
    assert code == EXIT_NO_DATA
    assert line == (
        "every source failed, nothing was read (us-east-1/ec2, us-east-1/eks; "
        "AWS answered AccessDenied); see the scan-failed findings"
    )


def test_says_refresh_the_credentials_when_aws_rejected_them_everywhere() -> None:
    code, line = scan_outcome(report(failed("us-east-1/ec2")), calls(ExpiredToken=3))
    assert code == EXIT_NO_DATA
    assert line is not None and "AWS rejected the credentials" in line


def test_a_partial_failure_exits_0_with_a_warning_naming_the_missing_sources() -> None:
    findings = [failed(f"r{i}/sagemaker/endpoints") for i in range(7)]
    code, line = scan_outcome(report(*findings), calls(succeeded=1, AccessDenied=7))
    assert code == EXIT_OK
    assert line is not None and line.startswith("warning: 7 sources failed")
    assert line.endswith("and 2 more")  # long lists are cut, the report has them all


def test_spot_prices_that_could_not_be_read_are_not_a_failed_source() -> None:
    # Spot instances were found (so something was read); they fall back to on-demand.
    spot = failed("us-east-1/ec2-spot-prices", Severity.WARNING)
    assert scan_outcome(report(spot), calls(succeeded=2)) == (EXIT_OK, None)
