"""Hostile test of the sweep's audit manifest on moto: odd keys must be audited as deleted."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from costguard.domain.tags import Tags
from tests.support.clock import MIDDAY
from tests.support.sweep import deleted_keys, put_aged, run_sweep, tagged_bucket


def test_an_object_whose_key_ends_in_a_carriage_return_is_in_the_deleted_manifest(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect: DeleteObjects answers each deleted key in XML, where a carriage return in
    a key reads back as a line feed (XML end-of-line normalisation; botocore escapes it in
    the request, nothing unescapes the answer). services/sweep.py _delete matches the
    answer's keys against the batch by exact string, so an object CostGuard really
    deleted ('tmp/old\\r') is missing from the 'deleted' audit manifest and from the
    pass's deleted counts (which also feed the in-pass breaker): "every action is
    audited" fails for it. (S3 asks clients to use EncodingType=url for such keys;
    DeleteObjects has no such option, so the answer must be matched leniently or the
    keys deleted one by one.)"""
    s3 = tagged_bucket(aws, "scratch", {Tags.TTL: "48h", Tags.PROJECT: "v"})
    odd = "tmp/old\r"
    for key, age in ((odd, 72), ("tmp/plain", 72), *((f"tmp/new-{i}", 1) for i in range(6))):
        put_aged(s3, "scratch", key, timedelta(hours=age), MIDDAY)

    def run(at: datetime) -> Any:
        return run_sweep(aws, at, monkeypatch, prefixes=None)

    # GIVEN a warned bucket; WHEN it is swept after the grace period
    assert run(MIDDAY).outcomes[0].step.value == "warned"
    assert run(MIDDAY + timedelta(hours=25)).outcomes[0].step.value == "acted"
    remaining = {o["Key"] for o in s3.list_objects_v2(Bucket="scratch")["Contents"]}
    assert odd not in remaining and "tmp/plain" not in remaining  # both really deleted
    # THEN the audit trail's 'deleted' manifest names every object that was deleted
    audited = deleted_keys(aws, "2026-11")
    assert sorted(audited) == sorted([odd, "tmp/plain"])
