"""The answer endpoint's edge: a Function URL event in, the desk's answer out, and an
accepted answer handed to the guard's own Lambda (asynchronously, nothing acted on here)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from costguard.adapters.answer_queue import LambdaAnswerQueue, UnknownGuardError
from costguard.domain.answers import Answer, Answerer, AnswerRequest, read_answer_event
from costguard.handlers.answer import http_request, process
from tests.answers.test_answer_desk import Desk, button_payload, slack_request
from tests.support.answers import function_url_event
from tests.support.clock import MIDDAY


def test_a_function_url_event_reads_as_the_request_slack_sent() -> None:
    sent = slack_request(button_payload())
    read = http_request(function_url_event(sent))
    assert (read.method, read.path, read.body) == ("POST", "/slack", sent.body)
    assert read.headers["x-slack-signature"] == sent.headers["x-slack-signature"]
    assert http_request({"isBase64Encoded": True, "body": "%%%"}).body == b"\xff"


def test_the_endpoint_answers_slack_at_once_and_never_caches() -> None:
    desk = Desk()
    answer = process(function_url_event(slack_request(button_payload())), desk.desk, MIDDAY)
    assert answer["statusCode"] == 200
    assert answer["headers"]["Cache-Control"] == "no-store"
    assert len(desk.queue.submitted) == 1
    refused = process(
        function_url_event(slack_request(button_payload(), secret=b"x")), desk.desk, MIDDAY
    )
    assert refused["statusCode"] == 401 and len(desk.queue.submitted) == 1


@dataclass
class RecordingLambda:
    invoked: list[dict[str, Any]] = field(default_factory=list)

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.invoked.append(kwargs)
        return {"StatusCode": 202}


def test_an_accepted_answer_is_handed_to_its_guards_lambda_asynchronously() -> None:
    client = RecordingLambda()
    queue = LambdaAnswerQueue(client, {"idle-notebooks": "costguard-idle"}, "us-east-1")
    request = AnswerRequest(
        "idle-notebooks",
        "123456789012/us-east-1/sagemaker-notebook/nb",
        Answer.KEEP_4H,
        Answerer("U024BE7LH", "slack", "@maria"),
        MIDDAY,
        MIDDAY.replace(hour=16),
        response_url="https://hooks.slack.com/actions/T/1/x",
        request_id="r-1",
    )
    queue.submit(request)
    [call] = client.invoked
    assert (call["FunctionName"], call["InvocationType"]) == ("costguard-idle", "Event")
    assert read_answer_event(json.loads(call["Payload"])) == request
    with pytest.raises(UnknownGuardError):
        queue.submit(
            AnswerRequest("nope", request.resource, Answer.ACT_NOW, request.answerer, MIDDAY)
        )
