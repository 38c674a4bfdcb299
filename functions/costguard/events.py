"""The Lambdas' edge: the one clock, scheduled events, and an invocation's time time_left.

The scheduled time is "now", if it is plausibly a schedule's time. Shared by every
scheduled Lambda (the scan, the actuators): time is captured once, at the edge, and a
retried invocation of the same event acts on exactly the same "now".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from costguard.domain.calendar import MAX_EVENT_AGE, MAX_EVENT_LEAD

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

#: The Lambda's clock, read once per invocation at the edge. Tests replace it.
CLOCK: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731


class EventTimeError(ValueError):
    """The event's time is too far from the clock to be a scheduled scan or its retry."""


class ScheduledEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")

    time: datetime | None = None

    @field_validator("time", mode="before")
    @classmethod
    def _iso_text_only(cls, value: object) -> object:
        # pydantic reads a number as seconds since 1970: `{"time": 5}` would be 1970.
        if value is not None and not isinstance(value, str):
            raise ValueError("must be an ISO-8601 time string such as 2026-11-20T12:00:00Z")
        return value

    def now(self, clock: datetime) -> datetime:
        """The scan's "now": the scheduled time, in UTC, if it is plausibly one.

        A time far in the past (the 1970 of a console test event) would accrue every
        instance's whole life again; one far ahead would accrue the rest of the month
        at once and then freeze accrual until that date. Both are refused.
        """
        if self.time is None:
            return clock
        try:
            moment = (
                self.time.astimezone(UTC) if self.time.tzinfo else self.time.replace(tzinfo=UTC)
            )
        except (OverflowError, ValueError):  # 9999-12-31T23:59:59-23:59 is past year 9999 UTC
            raise EventTimeError(
                f"event time {self.time.isoformat()} is outside the calendar in UTC; refused, "
                "nothing was written"
            ) from None
        if moment < clock - MAX_EVENT_AGE or moment > clock + MAX_EVENT_LEAD:
            raise EventTimeError(
                f"event time {moment.isoformat()} is more than {MAX_EVENT_AGE} before or "
                f"{MAX_EVENT_LEAD} after the clock ({clock.isoformat()}); refused, nothing "
                "was written. Invoke with no time (now) or a recent scheduled time."
            )
        return moment


E = TypeVar("E", bound=ScheduledEvent)


def scheduled_now(model: type[E], event: Any, clock: datetime) -> datetime:
    """Validate the event with ``model`` and return its "now" (raises EventTimeError)."""
    return parse_event(model, event).now(clock)


def parse_event(model: type[E], event: Any) -> E:
    try:
        return model.model_validate(event or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise EventTimeError(f"event {problems}; refused, nothing was written") from None


class LambdaTimeLeft:
    """The Lambda's remaining time, less a margin for the executor's follow-ups and the
    ledger writes after the last page."""

    MARGIN_SECONDS = 60.0

    def __init__(self, context: LambdaContext) -> None:
        self._context = context

    def seconds_left(self) -> float:
        return self._context.get_remaining_time_in_millis() / 1000.0 - self.MARGIN_SECONDS
