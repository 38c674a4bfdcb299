"""Money is `Decimal` USD, rounded only when shown."""

from __future__ import annotations

from collections.abc import Mapping
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


def cents_adding_up(total: Decimal, parts: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """``parts`` of ``total`` rounded to the cent so that they add up to ``cents(total)``.

    Each part rounded alone can miss by a cent ($1.005 + $1.005 is $2.01, shown $1.01 +
    $1.01): the cents still missing (or over) go one at a time to the parts that rounding
    moved furthest the other way (the largest-remainder method; ties in ``parts``' order).
    A split shown beside its total then adds up to it, as a reader will check.
    """
    target = cents(total)
    shown = {k: cents(v) for k, v in parts.items()}
    gap = target - sum(shown.values(), ZERO)
    if gap and shown:
        step = CENT if gap > 0 else -CENT
        # Furthest below its value first when cents are missing; furthest above when over.
        order = sorted(shown, key=lambda k: (shown[k] - parts[k]) * (1 if gap > 0 else -1))
        for i in range(int(abs(gap) / CENT)):
            k = order[i % len(order)]
            shown[k] += step
    # A part of nothing is $0.00, never -$0.00.
    return {k: v if v else abs(v) for k, v in shown.items()}
