"""Money is `Decimal` USD, rounded only when shown."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

ZERO = Decimal(0)
CENT = Decimal("0.01")
#: AWS prices per-GB-month storage on a 730-hour month.
HOURS_PER_PRICING_MONTH = Decimal(730)


def cents(value: Decimal) -> Decimal:
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def rate(value: Decimal) -> Decimal:
    """Round a $/h rate for display: four places keeps g4dn-class rates honest."""
    return value.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


def per_hour(value: Decimal) -> str:
    """``$55.04/h`` for people: cents above a dollar, four places below (g4dn-class rates),
    and ``$0.00/h`` for nothing at all (not ``$0.0000/h``)."""
    shown = cents(value) if abs(value) >= 1 or not value else rate(value)
    return f"${shown:,}/h"
