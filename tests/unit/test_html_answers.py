"""What counts as an HTML page where an AWS answer was due, and what it becomes: one
domain error, in one place (``costguard.adapters.aws``)."""

from __future__ import annotations

import pytest
from botocore.parsers import ResponseParserError

from costguard.adapters.aws import (
    HTML_PAGE,
    UNPARSEABLE,
    HtmlAnswerError,
    known_regions,
    reading,
    refuse_html_answers,
    unknown_region,
)
from costguard.ports import SourceError

PAGE = b"\n  <!DOCTYPE html><html><body>Bad gateway<br></body></html>"


@pytest.mark.parametrize("status", [200, 301, 400, 403, 404])
def test_an_html_page_is_refused_whatever_its_status(status: int) -> None:
    with pytest.raises(HtmlAnswerError) as caught:
        refuse_html_answers({"status_code": status, "headers": {}, "body": PAGE})
    assert caught.value.status == status


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (503, PAGE),  # botocore retries it (and parses `<html>` pages as a generic error)
        (429, PAGE),
        (500, PAGE),
        (200, b'<?xml version="1.0"?><DescribeInstancesResponse/>'),  # EC2's own XML
        (200, b'{"NotebookInstances": []}'),
        (200, b""),  # HeadObject of an HTML object: its Content-Type is the object's
    ],
)
def test_answers_botocore_handles_are_left_to_it(status: int, body: bytes) -> None:
    refuse_html_answers({"status_code": status, "headers": {}, "body": body})


def test_a_streamed_body_is_the_callers_data_not_an_answer() -> None:
    # GIVEN S3 GetObject of an HTML object: botocore hands the raw stream, not bytes
    class Stream:
        def read(self) -> bytes:  # pragma: no cover - never read by the hook
            raise AssertionError("the hook must not consume a streamed body")

    refuse_html_answers({"status_code": 200, "headers": {}, "body": Stream()})


def test_every_unparseable_answer_is_a_source_error_with_one_readable_line() -> None:
    malformed = ResponseParserError(
        "Unable to parse response (not well-formed (invalid token): line 2, column 26), "
        "invalid XML received. Further retries may succeed:\nb'<!DOCTYPE html>\\n<html>...'"
    )
    garbled = ResponseParserError("Unable to parse response: b'\\x00\\x01'")
    found = []
    for exc in (HtmlAnswerError(404), malformed, garbled):
        with pytest.raises(SourceError) as caught, reading("ec2", "us-east-1", "DescribeInstances"):
            raise exc
        found.append((caught.value.code, caught.value.detail))
    assert found == [
        ("HTTP 404", HTML_PAGE),
        (UNPARSEABLE, HTML_PAGE),
        (UNPARSEABLE, "the endpoint's answer could not be parsed"),
    ]


@pytest.mark.parametrize(
    "region",
    ["us-east-1", "ap-east-1", "me-central-1", "il-central-1", "us-gov-east-1", "cn-northwest-1"],
)
def test_opt_in_regions_and_every_partitions_regions_are_known(region: str) -> None:
    assert region in known_regions()
    assert unknown_region(region) is None


def test_a_region_no_partition_has_is_named_with_the_nearest_ones() -> None:
    message = unknown_region("us-east-9")
    assert message is not None
    assert message.startswith("unknown AWS region 'us-east-9': no partition botocore ")
    assert "did you mean us-east-" in message and "\n" not in message
