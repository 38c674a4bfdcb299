"""Shared fixtures: fake AWS credentials for everything, moto in-process or over HTTP."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture(autouse=True)
def _fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may reach a real account, whatever the developer's shell holds."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # A warm Lambda's stored price catalog must not outlive the test (and moto) that made it.
    from costguard.wiring import CATALOG_CACHE

    CATALOG_CACHE.clear()


@pytest.fixture(autouse=True, scope="session")
def _cloudtrail_history() -> None:
    """moto answers CloudTrail's LookupEvents from the AttachVolume calls it accepted (it
    implements neither): the stale-volume guard's proof before deleting a volume."""
    from costguard_demo.cloudtrail import install

    install()


@pytest.fixture
def aws() -> Iterator[object]:
    """moto in-process, and a boto3 session bound to it."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        yield boto3.Session()
