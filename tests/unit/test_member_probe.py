"""The member probe's answers when services refuse or throttle (no AWS: clients that raise)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard.adapters.member import MemberProbe, regions_read_from
from costguard.ports import ThrottledError


class Raising:
    """A client whose every call raises ``code``."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __getattr__(self, name: str) -> Any:
        def call(*_a: Any, **_k: Any) -> Any:
            raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, name)

        return call


class Empty:
    """An EC2 client with no instance."""

    def get_paginator(self, _name: str) -> Any:
        class P:
            def paginate(self, **_: Any) -> Any:
                return iter([{"Reservations": []}])

        return P()


class Clients:
    account = "222222222222"

    def __init__(self, ec2: Any, other: Any) -> None:
        self._ec2, self._other = ec2, other

    def ec2(self, region: str) -> Any:
        return self._ec2

    def eks(self, region: str) -> Any:
        return self._other

    def sagemaker(self, region: str) -> Any:
        return self._other

    def tagging(self, region: str) -> Any:
        return self._other


def test_a_region_that_refuses_every_call_is_blind_not_empty() -> None:
    deny = Raising("AccessDenied")
    answer = MemberProbe(Clients(deny, deny)).probe("eu-south-1")  # type: ignore[arg-type]
    assert answer.found == () and answer.blind
    assert "ec2:DescribeInstances" in answer.denied and len(answer.denied) == 5


def test_a_service_that_refuses_is_named_and_the_rest_still_answer() -> None:
    answer = MemberProbe(Clients(Empty(), Raising("AccessDeniedException"))).probe("eu-west-1")  # type: ignore[arg-type]
    assert answer.found == () and not answer.blind and answer.unknown
    assert answer.denied == (
        "eks:ListClusters",
        "sagemaker:ListNotebookInstances",
        "sagemaker:ListEndpoints",
        "sagemaker:ListTrainingJobs",
    )


def test_throttling_fails_the_probe_for_the_queue_to_retry() -> None:
    with pytest.raises(ThrottledError):
        MemberProbe(Clients(Raising("RequestLimitExceeded"), Empty())).probe("us-east-1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("home", "expected"),
    [
        ("af-south-1", "us-east-1"),
        ("us-gov-east-1", "us-gov-west-1"),
        ("cn-northwest-1", "cn-north-1"),
    ],
)
def test_regions_are_read_from_a_region_every_account_has(home: str, expected: str) -> None:
    assert regions_read_from(home) == expected
