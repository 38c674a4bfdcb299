"""What AWS billed a project beside what the scan saw: Cost Explorer's month against the
ledger's, with the data transfer and the rest of what the scan cannot see.

The scan prices what it finds (accelerators, their storage). The bill also holds what no
inventory shows: data transfer, requests, monitoring. Cost Explorer lags by up to a day and
counts every cost carrying the project tag, so the difference is information, never a
correction of the ledger:

- ``billed``: Cost Explorer's month to date for the project tag;
- ``seen``: the ledger's month to date (what the scan accrued);
- ``data_transfer``: the part of ``billed`` whose usage type is data transfer;
- ``not_seen``: billed but not seen by the scan: the data transfer, and ``other``, the rest
  of the bill above what the scan saw;
- ``difference``: ``billed - seen``, signed (negative when the scan counted more than the
  bill shows yet: Cost Explorer's lag, credits, or costs not tagged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from costguard.domain.money import ZERO

#: Usage types of data transfer: ``USE1-DataTransfer-Out-Bytes``, ``DataTransfer-Regional-
#: Bytes``, inter-region ``USE1-USW2-AWS-Out-Bytes``, CloudFront's ``…-DataTransfer-Out-…``,
#: NAT and VPC endpoints' ``NatGateway-Bytes`` / ``VpcEndpoint-Bytes``.
_DATA_TRANSFER = re.compile(
    r"DataTransfer|-AWS-(?:In|Out)-Bytes|NatGateway-Bytes|VpcEndpoint-Bytes|-Out-Bytes-",
    re.IGNORECASE,
)


#: What the billed figures are, wherever they are shown.
BILLED_NOTE = (
    "Billed: AWS Cost Explorer's month to date for the project tag (up to a day behind), "
    "every cost carrying the tag. Not seen by the scan: its data transfer, and the rest "
    "of the bill above what the scan priced (requests, monitoring, untracked services)."
)


def is_data_transfer(usage_type: str) -> bool:
    return bool(_DATA_TRANSFER.search(usage_type))


@dataclass(frozen=True, slots=True)
class Billed:
    """One project's month: billed by AWS beside seen by the scan (None: no project tag)."""

    project: str | None
    seen: Decimal
    billed: Decimal
    data_transfer: Decimal = ZERO

    @property
    def difference(self) -> Decimal:
        return self.billed - self.seen

    @property
    def other(self) -> Decimal:
        """Billed, not data transfer, and above what the scan saw."""
        return max(ZERO, self.billed - self.data_transfer - self.seen)

    @property
    def not_seen(self) -> Decimal:
        return self.data_transfer + self.other

    def document(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "seen_usd": str(self.seen),
            "billed_usd": str(self.billed),
            "data_transfer_usd": str(self.data_transfer),
        }


@dataclass(frozen=True, slots=True)
class BilledMonth:
    """The month's rows, as of Cost Explorer's last read."""

    as_of: str
    rows: tuple[Billed, ...]

    def document(self) -> dict[str, Any]:
        return {"at": self.as_of, "rows": [r.document() for r in self.rows]}


def billed_rows(
    billed: Mapping[str | None, tuple[Decimal, Decimal]], seen: Mapping[str | None, Decimal]
) -> tuple[Billed, ...]:
    """``billed``: project -> (its total, of which data transfer); ``seen``: the ledger's.
    Every project either knows, the untagged last."""
    names = sorted(set(billed) | set(seen), key=lambda p: (p is None, p or ""))
    return tuple(Billed(p, seen.get(p, ZERO), *billed.get(p, (ZERO, ZERO))) for p in names)


def read_billed_month(document: Mapping[str, Any]) -> BilledMonth | None:
    """The state document back (None when there is none, or it is not one)."""
    rows: list[Billed] = []
    raw = document.get("rows")
    if not isinstance(raw, Sequence) or not document.get("at"):
        return None
    for row in raw:
        if not isinstance(row, Mapping):
            continue
        try:
            project = row.get("project")
            rows.append(
                Billed(
                    str(project) if project is not None else None,
                    Decimal(str(row.get("seen_usd", row.get("ledger_usd", "0")))),
                    Decimal(str(row.get("billed_usd", row.get("cost_explorer_usd", "0")))),
                    Decimal(str(row.get("data_transfer_usd", "0"))),
                )
            )
        except InvalidOperation:
            continue
    return BilledMonth(str(document["at"]), tuple(rows))
