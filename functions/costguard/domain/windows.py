"""Is this time in that window: the one place the ends of a time window are decided.

Every end is exclusive unless its name says otherwise: a lease, a hold, an exemption or
a grace period is over *at* its end, and a window ``[start, end)`` does not hold its
end, so two windows that meet never both hold one instant. Only :func:`between`, for
reading back records stamped in a closed range, holds both of its ends.
"""

from __future__ import annotations

from datetime import datetime


def within(t: datetime, start: datetime, end: datetime) -> bool:
    """``t`` in ``[start, end)``."""
    return start <= t < end


def between(t: datetime, first: datetime, last: datetime) -> bool:
    """``t`` in ``[first, last]``: both ends held."""
    return first <= t <= last


def before(t: datetime, end: datetime | None) -> bool:
    """``t`` before an end that may never come (``None``): an exemption, a deadline."""
    return end is None or t < end


def held(t: datetime, until: datetime | None) -> bool:
    """A hold that ends at ``until`` (a lease, a retention) still runs at ``t``;
    no ``until``, no hold."""
    return until is not None and t < until
