"""The answer queue of the demo and the e2e tests.

Where the deployed answer endpoint invokes the answered guard's own Lambda asynchronously,
this one runs the guard Lambda's own handler (``take_answer``) in this process: moto's
Lambda cannot run CostGuard's code. The endpoint itself is the answer handler behind a
loopback Function URL (:class:`costguard_demo.function_url.FunctionUrlServer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from costguard.domain.answers import AnswerRequest


@dataclass
class GuardsInProcess:
    """The answer queue of the demo and the e2e tests: each accepted answer is taken by the
    guard Lambda's own handler, here and now, with ``settings`` (the guard's deployment
    settings) on ``session``, at the time ``clock`` says."""

    settings: Any
    session: Any
    clock: Callable[[], datetime]
    #: Where the Slack stand-in listens (a response URL is followed only there).
    slack_origin: str | None = None
    #: Guard name -> factory, for tests; None: the deployment's guards.
    guards: Mapping[str, Any] | None = None
    #: What each answer came to (the handler's result), in order.
    taken: list[dict[str, Any]] = field(default_factory=list)

    def submit(self, request: AnswerRequest) -> None:
        from costguard.domain.answers import answer_event
        from costguard.handlers.act import take_answer

        self.taken.append(
            take_answer(
                answer_event(request),
                self.settings,
                self.session,
                self.clock(),
                guards=self.guards,
                slack_origin=self.slack_origin,
            )
        )
