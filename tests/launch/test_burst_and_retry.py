"""A burst of launches, a throttled CloudTrail, and a publish that fails halfway (moto
in-process, the check as ``wiring.launch`` builds it, through ``on_launch.run``).

A team that starts 1,000 GPU instances at once sends 1,000 events in a burst. Every event
must be judged without an exception (an exception is a Lambda retry, then a DLQ entry),
each resource alerted once, and the AWS calls must grow with the events, never with
retries: CloudTrail's ``LookupEvents`` allows two calls a second per account and region,
so a burst is throttled there, and retrying would only make the storm bigger.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from costguard.handlers.on_launch import LaunchCheckFailed, run
from tests.support.clock import MIDDAY
from tests.support.launch import Calls, LaunchWorld, running

NOW = MIDDAY
BURST = 1000


@pytest.fixture
def world(aws: Any) -> Iterator[LaunchWorld]:
    yield LaunchWorld.create(aws)


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def throttle_cloudtrail(session: Any) -> None:
    """Every ``LookupEvents`` answered as CloudTrail answers past its rate: HTTP 400
    ``ThrottlingException`` (a code botocore's retry modes retry)."""

    def answer(request: Any, **_: Any) -> AWSResponse:
        body = b'{"__type":"ThrottlingException","message":"Rate exceeded"}'
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": "r"}
        return AWSResponse(request.url, 400, headers, _Body(body))

    session.events.register_first("before-send.cloudtrail.LookupEvents", answer)


def test_a_burst_of_1000_launches_alerts_each_once_with_calls_that_grow_with_events_not_retries(
    world: LaunchWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN 1,000 untagged g5 instances launched at once, and CloudTrail throttling every
    lookup WHEN their 1,000 running events reach one warm container (and a tenth of them
    again: AWS redelivers) THEN no event raises (nothing would reach the DLQ), each
    instance is alerted exactly once, and every call is made once: no retry anywhere, and
    never of the CloudTrail lookup.

    The ledger is the in-memory one (its contract with DynamoDB's is
    tests/functional/test_ledger_contract.py): moto's DynamoDB takes ~17 ms a conditional
    update once the table holds thousands of claims, which made this test 4 minutes long.
    EC2, CloudTrail and SNS are moto's."""
    from costguard.adapters.memory import InMemoryLedger

    # GIVEN
    ledger = InMemoryLedger()
    monkeypatch.setattr("costguard.wiring.launch.build_ledger", lambda *_: ledger)
    instances = world.run_instances("g5.xlarge", BURST)
    calls = Calls()
    check = world.check(calls, hooks=throttle_cloudtrail)
    # WHEN (the topic's subscriber reads as the alerts arrive, as a real one does: moto's SQS
    # scans its whole queue for every message sent and received, so a queue left to fill
    # with the burst made this test quadratic in it)
    results: list[dict[str, Any]] = []
    published: list[dict[str, Any]] = []
    for n, instance in enumerate(instances, 1):
        results.append(run(check, running(instance, NOW), NOW))
        if n % 10 == 0:
            published += world.published()
    published += world.published()
    # THEN no exception, and every launch alerted
    assert [r["launches"][0]["outcome"] for r in results] == ["alerted"] * BURST
    assert len(published) == BURST
    alerted = sorted(r["key"].rsplit("/", 1)[1] for m in published for r in m["resources"])
    assert alerted == sorted(instances)
    # AND the calls grow with the events: one describe, one lookup, one publish each
    assert calls.calls["ec2.DescribeInstances"] == BURST
    assert calls.calls["cloudtrail.LookupEvents"] == BURST
    assert calls.calls["sns.Publish"] == BURST
    # (the type and the stored catalog: at most once per warm process, which earlier
    # tests in this one may have warmed)
    once = calls.calls["ec2.DescribeInstanceTypes"] + calls.calls["dynamodb.GetItem"]
    assert once <= 2, calls.calls
    assert calls.total() - once == 3 * BURST, calls.calls
    # AND not with retries: as many HTTP attempts as calls, CloudTrail's throttles included
    assert calls.attempts["cloudtrail.LookupEvents"] == BURST
    assert sum(calls.attempts.values()) == calls.total(), (calls.attempts, calls.calls)

    # WHEN part of the burst is delivered again, a minute later
    calls.clear()
    later = NOW + timedelta(minutes=1)
    again = [run(check, running(i, NOW), later) for i in instances[::10]]
    # THEN nothing is published twice, and still no retry
    assert {r["launches"][0]["outcome"] for r in again} == {"quiet"}
    assert world.published() == []
    assert calls.calls["sns.Publish"] == 0
    assert sum(calls.attempts.values()) == calls.total()


def test_the_cloudtrail_lookup_is_made_once_and_never_retried(world: LaunchWorld) -> None:
    """Defect guarded: the lookup on the clients' standard retry configuration would make
    up to three attempts per launch against a 2-calls-a-second API."""
    (p5,) = world.run_instances("p5.48xlarge")
    calls = Calls()
    result = run(world.check(calls, hooks=throttle_cloudtrail), running(p5, NOW), NOW)
    assert result["launches"][0]["outcome"] == "alerted"
    assert calls.attempts["cloudtrail.LookupEvents"] == 1
    (alert,) = world.published()
    assert alert["facts"]["launched_by"].startswith("not known yet")


def fail_publish_for(instance: str, failures: list[str]) -> Any:
    """A hook: SNS refuses the publish of an alert naming ``instance`` (once)."""

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if instance in params.get("Message", "") and not failures:
            failures.append(instance)
            raise ClientError(
                {"Error": {"Code": "KMSDisabled", "Message": "the topic's key is disabled"}},
                "Publish",
            )

    def hooks(session: Any) -> None:
        session.events.register("provide-client-params.sns.Publish", refuse)

    return hooks


def test_a_publish_that_fails_halfway_raises_and_the_retry_sends_exactly_once(
    world: LaunchWorld,
) -> None:
    """GIVEN three untagged p5 launches, and SNS refusing the second one's alert once WHEN
    the three events are handled THEN the first and third are sent, the second raises
    LaunchCheckFailed (so Lambda retries it) AND when Lambda retries the second event (and
    EventBridge redelivers all three) exactly one more alert goes out: the second's."""
    first, second, third = world.run_instances("p5.48xlarge", 3)
    failures: list[str] = []
    check = world.check(hooks=fail_publish_for(second, failures))
    assert run(check, running(first, NOW), NOW)["launches"][0]["outcome"] == "alerted"
    with pytest.raises(LaunchCheckFailed, match="KMSDisabled"):
        run(check, running(second, NOW), NOW)
    assert run(check, running(third, NOW), NOW)["launches"][0]["outcome"] == "alerted"
    assert failures == [second]
    sent = {m["resources"][0]["key"].rsplit("/", 1)[1] for m in world.published()}
    assert sent == {first, third}
    # WHEN Lambda retries the failed event (a minute later), and the others come again
    retry = NOW + timedelta(minutes=1)
    outcomes = [
        run(check, running(i, NOW), retry)["launches"][0]["outcome"] for i in (second, first, third)
    ]
    # THEN only the failed one is sent, once
    assert outcomes == ["alerted", "quiet", "quiet"]
    (resent,) = world.published()
    assert resent["resources"][0]["key"].endswith(second)
