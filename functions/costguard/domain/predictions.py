"""Cost per prediction: what 1,000 predictions of a SageMaker endpoint variant cost.

A real-time (or asynchronous) variant bills its instances by the hour whether they serve
or not, so its cost per prediction is its $/h over the ``Invocations`` it served an hour:
``$ per 1,000 = usd_per_hour / invocations_per_hour x 1,000``. A variant at $1.21/h serving
12,100 invocations an hour costs $0.10 per 1,000 predictions.

- **Now**: the variant's current $/h over its invocations per hour in the last 24 whole
  hours (:func:`prediction_window`'s last day), counting only the hours its current
  configuration was in place (a variant moved to another type an hour ago is judged on
  that hour, not on traffic its former type served).
- **Per day**: each UTC day of the window (:data:`DAYS_BACK` whole days, then today so far):
  the day's cost over the day's invocations. A day's cost is known for the hours of the
  current configuration, for the hours before the endpoint existed ($0), and for hours a
  rate recorded by an earlier scan covers (``earlier``); a day with any other hour is
  "cost unknown", never a guess.
- **Zero traffic** is "no traffic", never a division by zero and never $0 per 1,000.
- **Unpriced** variants stay unpriced: their invocations are shown, their cost is not.
- **Asynchronous** variants bill by the instance like real-time ones (scaling to zero:
  no instance, no $/h), but publish no ``Invocations``: their cost per prediction is
  "unknown" with :data:`ASYNC_UNCOUNTED` as the reason, never "no traffic".
- **Serverless** variants bill per GB-second of compute (by memory size) and per GB
  processed; the price catalog carries neither unit today, so the scan reports each as an
  "unpriced" finding with :data:`SERVERLESS_UNPRICED` as the reason
  (``adapters.sagemaker.serverless_findings``), and lists none here.

Pure: the scan passes the priced variant, its hourly invocation sums and ``now``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from enum import StrEnum

from costguard.domain.calendar import require_utc
from costguard.domain.models import parse_key
from costguard.domain.money import ZERO, cents, rate
from costguard.domain.pricing import PricedResource

#: Predictions per figure: "$ per 1,000 predictions".
PER = Decimal(1000)
#: Whole UTC days read back before today, for the per-day figures and the jump advice.
DAYS_BACK = 7
#: The current figure's window: the last 24 whole hours.
CURRENT_HOURS = 24
#: Invocations are read as hourly sums (one datapoint an hour per variant): 7 days and
#: today so far is at most 191 datapoints, so 500 variants fit one GetMetricData call.
HOUR = timedelta(hours=1)
#: Why an asynchronous variant has no cost per prediction (its $/h is its instances').
ASYNC_UNCOUNTED = (
    "asynchronous endpoints publish no Invocations (their InvocationsProcessed is counted "
    "per endpoint, not per variant): its predictions are not counted, so its cost per "
    "prediction is unknown, not no traffic"
)
#: At most this many variants' rates are recorded (one ledger item, under 400 KB); the
#: rest have no earlier rate, so their days before a change are "cost unknown".
MAX_RECORDED = 2000
#: Why a serverless variant has no cost per prediction (and no $/h).
SERVERLESS_UNPRICED = (
    "serverless inference bills per GB-second of compute (by memory size) and per GB "
    "processed; the price catalog carries no serverless rates, so it is unpriced, not $0"
)


class CostStatus(StrEnum):
    PRICED = "priced"
    NO_TRAFFIC = "no traffic"
    UNPRICED = "unpriced"
    #: The invocations could not be read (or the configuration is younger than an hour).
    UNKNOWN = "unknown"
    #: An asynchronous endpoint with no instance now: it bills nothing this hour.
    SCALED_TO_ZERO = "scaled to zero"
    #: A day some of whose hours ran a configuration no scan priced.
    COST_UNKNOWN = "cost unknown"


@dataclass(frozen=True, slots=True)
class DayCost:
    """One UTC day of a variant: its cost (None: unknown) over its invocations."""

    day: date
    #: Hours of the day in the window (24, or today so far).
    hours: int
    invocations: Decimal
    usd: Decimal | None

    @property
    def usd_per_1000(self) -> Decimal | None:
        if self.usd is None or self.invocations <= 0:
            return None
        return self.usd / self.invocations * PER

    @property
    def status(self) -> CostStatus:
        if self.usd is None:
            return CostStatus.COST_UNKNOWN
        if self.invocations <= 0:
            return CostStatus.NO_TRAFFIC
        return CostStatus.PRICED

    def as_dict(self) -> dict[str, object]:
        per = self.usd_per_1000
        return {
            "day": self.day.isoformat(),
            "hours": self.hours,
            "invocations": int(self.invocations),
            "usd": None if self.usd is None else float(cents(self.usd)),
            "usd_per_1000_predictions": None if per is None else float(rate(per)),
            "status": self.status.value,
        }


@dataclass(frozen=True, slots=True)
class PredictionCost:
    """One endpoint variant's cost per 1,000 predictions, now and per day."""

    key: str
    endpoint: str
    variant: str
    instance_type: str | None
    count: int
    #: None: unpriced (never $0).
    usd_per_hour: Decimal | None
    #: Invocations an hour over the current configuration's hours of the last day; None
    #: when unknown (not read, or the read failed).
    invocations_per_hour: Decimal | None
    usd_per_1000: Decimal | None
    status: CostStatus
    reason: str
    days: tuple[DayCost, ...] = ()
    #: Whole hours of the last day the current configuration served (the figure's basis).
    hours: int = 0

    @property
    def account(self) -> str:
        """The variant's account, from its key ("" when the scan knew none)."""
        parts = parse_key(self.key)
        return parts.account if parts is not None else ""

    @property
    def region(self) -> str:
        parts = parse_key(self.key)
        return parts.region if parts is not None else ""

    def as_dict(self) -> dict[str, object]:
        return {
            "resource": self.key,
            "endpoint": self.endpoint,
            "variant": self.variant,
            "instance_type": self.instance_type,
            "count": self.count,
            "usd_per_hour": None if self.usd_per_hour is None else float(rate(self.usd_per_hour)),
            "invocations_per_hour": (
                None
                if self.invocations_per_hour is None
                else float(self.invocations_per_hour.quantize(Decimal("0.01")))
            ),
            "usd_per_1000_predictions": (
                None if self.usd_per_1000 is None else float(rate(self.usd_per_1000))
            ),
            "status": self.status.value,
            "reason": self.reason,
            "hours": self.hours,
            "days": [d.as_dict() for d in self.days],
        }


def prediction_window(now: datetime) -> tuple[datetime, datetime]:
    """``(start, end)``: from midnight UTC :data:`DAYS_BACK` days before the last whole
    hour's day, to the last whole hour. Aligned, so every scan of an hour reads the same."""
    end = require_utc(now).replace(minute=0, second=0, microsecond=0)
    start = datetime.combine(end.date() - timedelta(days=DAYS_BACK), time(0), tzinfo=UTC)
    return start, end


def _hour_floor(moment: datetime) -> datetime:
    return require_utc(moment).replace(minute=0, second=0, microsecond=0)


def _hours(start: datetime, end: datetime) -> list[datetime]:
    out, at = [], start
    while at < end:
        out.append(at)
        at += HOUR
    return out


def cost_per_prediction(
    item: PricedResource,
    hourly: Mapping[datetime, Decimal] | None,
    now: datetime,
    earlier: Sequence[tuple[datetime, Decimal]] = (),
) -> PredictionCost:
    """The variant's cost per 1,000 predictions now and per day of the window.

    ``hourly``: invocations per hour start (an hour absent served none), or None when they
    could not be read. ``earlier``: ``(since, $/h)`` the variant billed from each instant,
    as earlier scans recorded it (oldest first), for the hours before its current
    configuration.
    """
    r, usd_per_hour = item.resource, item.usd_per_hour
    endpoint, _, variant = r.id.partition("/")
    start, end = prediction_window(now)
    since = r.config_since

    found = PredictionCost(
        r.key,
        endpoint,
        variant,
        r.instance_type,
        r.count,
        usd_per_hour,
        None,
        None,
        CostStatus.UNKNOWN,
        "its Invocations could not be read: the cost per prediction is unknown, not $0",
    )
    if r.asynchronous:
        return replace(found, reason=ASYNC_UNCOUNTED)
    if hourly is None:
        return found
    found = replace(found, days=_days(item, hourly, start, end, earlier))
    # The current figure: the last 24 whole hours the current configuration served.
    last_day = _hours(end - CURRENT_HOURS * HOUR, end)
    # Whole hours only: the hour a configuration changed in mixed two.
    if since is not None:
        last_day = [h for h in last_day if h >= require_utc(since)]
    elif r.launched_at is not None:
        last_day = [h for h in last_day if h >= require_utc(r.launched_at)]
    if not last_day:
        return replace(
            found,
            reason="its configuration is younger than an hour: no whole hour to judge it on yet",
        )
    served = sum((hourly.get(h, ZERO) for h in last_day), ZERO)
    per_hour = served / len(last_day)
    found = replace(found, invocations_per_hour=per_hour, hours=len(last_day))
    if usd_per_hour is None:
        return replace(
            found,
            status=CostStatus.UNPRICED,
            reason="its instance type has no price: unpriced, not $0",
        )
    if r.count <= 0:
        return replace(
            found,
            status=CostStatus.SCALED_TO_ZERO,
            reason="no instance runs now (an asynchronous endpoint scaled to zero): it bills "
            "nothing this hour",
        )
    if served <= 0:
        return replace(
            found,
            status=CostStatus.NO_TRAFFIC,
            reason=f"no invocations in the last {len(last_day)} h: it bills "
            f"${rate(usd_per_hour)}/h for no predictions",
        )
    return replace(
        found,
        usd_per_1000=usd_per_hour / per_hour * PER,
        status=CostStatus.PRICED,
        reason=f"${rate(usd_per_hour)}/h over {per_hour:,.0f} invocations an hour "
        f"(last {len(last_day)} h)",
    )


def _days(
    item: PricedResource,
    hourly: Mapping[datetime, Decimal],
    start: datetime,
    end: datetime,
    earlier: Sequence[tuple[datetime, Decimal]],
) -> tuple[DayCost, ...]:
    """Each UTC day's cost (None: some hour's rate is unknown) and invocations.

    An hour's rate: the current one from the current configuration's hour on, $0 for a
    whole hour before the endpoint existed, else the last rate an earlier scan recorded
    from that hour or before; None when none of them covers the hour.
    """
    r = item.resource
    created = require_utc(r.launched_at) if r.launched_at is not None else None
    current = _hour_floor(r.config_since) if r.config_since is not None else None
    recorded = [(_hour_floor(since), usd) for since, usd in earlier]
    by_day: dict[date, list[datetime]] = {}
    for h in _hours(start, end):
        by_day.setdefault(h.date(), []).append(h)
    out = []
    for day, hours in sorted(by_day.items()):
        total, known = ZERO, True
        for h in hours:
            if created is not None and h + HOUR <= created:
                continue  # $0: the endpoint did not exist yet
            at: Decimal | None
            if current is not None and h >= current:
                at = item.usd_per_hour
            else:
                at = None
                for since, value in recorded:
                    if since <= h:
                        at = value
            if at is None:
                known = False
                break
            total += at
        usd = total if known else None
        invocations = sum((hourly.get(h, ZERO) for h in hours), ZERO)
        out.append(DayCost(day, len(hours), invocations, usd))
    return tuple(out)


def _parsed(entries: object) -> list[tuple[datetime, Decimal]]:
    """A stored ``[[iso instant, "$/h"], ...]``, oldest first; malformed entries dropped."""
    out: list[tuple[datetime, Decimal]] = []
    if not isinstance(entries, list):
        return out
    for entry in entries:
        try:
            since, usd = entry
            at = datetime.fromisoformat(str(since))
            value = Decimal(str(usd))
        except (TypeError, ValueError, ArithmeticError):
            continue
        if at.tzinfo is None or not value.is_finite() or value < 0:
            continue
        out.append((at.astimezone(UTC), value))
    return sorted(out)


def recorded_rates(
    stored: Mapping[str, object],
    variants: Sequence[PricedResource],
    now: datetime,
    start: datetime,
    keep_regions: Collection[str] = (),
) -> tuple[dict[str, list[tuple[datetime, Decimal]]], dict[str, list[list[str]]]]:
    """The rates each variant billed at as earlier scans recorded them, and the record
    with this scan's rates added.

    ``stored``: variant key -> ``[[since, $/h], ...]``. A variant whose rate differs from
    its last recorded one gets an entry from its configuration's date (now when unknown);
    an unpriced one records nothing (no rate is not $0). Entries superseded before
    ``start`` are dropped (the window needs only the one in force at its start), and so
    are variants no longer seen, unless their region is in ``keep_regions`` (its
    SageMaker read failed: not seen is not gone).
    """
    now = require_utc(now)
    earlier = {key: _parsed(entries) for key, entries in stored.items()}
    updated: dict[str, list[tuple[datetime, Decimal]]] = {}
    seen = set()
    for item in variants:
        r, usd = item.resource, item.usd_per_hour
        seen.add(r.key)
        entries = list(earlier.get(r.key, []))
        if usd is not None and (not entries or entries[-1][1] != usd):
            since = require_utc(r.config_since) if r.config_since is not None else now
            if entries and since <= entries[-1][0]:
                since = now
            entries.append((since, usd))
        if entries:
            updated[r.key] = entries
    for key, entries in earlier.items():
        if key in seen or not entries:
            continue
        parts = parse_key(key)
        if parts is not None and parts.region in keep_regions:
            updated[key] = entries
    trimmed = {
        key: [
            e for i, e in enumerate(entries) if i + 1 == len(entries) or entries[i + 1][0] > start
        ]
        for key, entries in updated.items()
    }
    # One ledger item holds the record (400 KB): the variants whose rate changed within the
    # window first, then the rest by key, up to MAX_RECORDED.
    chosen = sorted(trimmed.items(), key=lambda kv: (len(kv[1]) == 1, kv[0]))[:MAX_RECORDED]
    record = {
        key: [[since.isoformat(), str(usd)] for since, usd in entries]
        for key, entries in sorted(chosen)
    }
    return earlier, record
