"""Where the answer endpoint hands an accepted answer: the answered guard's own Lambda,
invoked asynchronously (``InvocationType=Event``). The endpoint's role may invoke those
functions and nothing else: it cannot stop, delete or tag anything itself."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from costguard.adapters.aws import reading
from costguard.domain.answers import AnswerRequest, answer_event


class UnknownGuardError(LookupError):
    """An answer to a guard this deployment has no Lambda for."""


class LambdaAnswerQueue:
    def __init__(self, client: Any, functions: Mapping[str, str], region: str) -> None:
        """``functions``: guard name -> its act Lambda's name or ARN."""
        self._client = client
        self._functions = dict(functions)
        self._region = region

    def submit(self, request: AnswerRequest) -> None:
        function = self._functions.get(request.guard)
        if function is None:
            raise UnknownGuardError(f"no Lambda for the {request.guard!r} guard")
        with reading("lambda", self._region, "Invoke"):
            self._client.invoke(
                FunctionName=function,
                InvocationType="Event",
                Payload=json.dumps(answer_event(request)).encode(),
            )
