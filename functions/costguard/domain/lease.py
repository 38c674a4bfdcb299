"""The one lease: a two-phase claim on a piece of work, taken, then confirmed or released.

Used for an action or a warning (the ledger's claims, ``ONCE#`` records) and for an
Organization time's aggregation (on the plan item). A claim holds the work until its
lease expires, so a holder that crashed loses it; a confirmed claim is done and stays
done (only :meth:`Lease.reopened` by its own fence makes it claimable again); a release
frees it, and only the holder can release it: the claim time is its fence, so a holder
whose lease ran out cannot free the claim of the run that took over.

The DynamoDB adapters write the same rule as condition expressions on their items; the
contract tests run both against :class:`costguard.adapters.memory.InMemoryLeases`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from costguard.domain.windows import held

#: The states of a claim, as the ledger stores them.
PENDING, DONE, RELEASED = "pending", "sent", "released"


@dataclass(frozen=True, slots=True)
class Lease:
    status: str
    #: When it was claimed (or, done at once, recorded): the fence of its release.
    at: datetime
    expires: datetime | None = None
    #: What a confirmed claim was confirmed for (see :meth:`reopened`).
    fence: str | None = None

    def claimable(self, now: datetime, *, monotonic: bool = True) -> bool:
        """Free, or pending with its lease run out. ``monotonic``: time never moves
        backwards, so a claim older than the last one (a late retry with a stale now)
        is refused and cannot end a lease before its time."""
        if monotonic and now < self.at:
            return False
        return self.status == RELEASED or (self.status == PENDING and not held(now, self.expires))

    def released_by(self, claimed_at: datetime) -> Lease | None:
        """Released, if pending and held by the claim of ``claimed_at`` (else None)."""
        return (
            replace(self, status=RELEASED)
            if self.status == PENDING and self.at == claimed_at
            else None
        )

    def reopened(self, fence: str, keep: str | None = None) -> Lease | None:
        """Released, if done for ``fence`` (or work under it, ``fence/...``) and not for
        ``keep`` (else None): a put-once record has no fence and is never reopened."""
        mine = self.fence is not None and (
            self.fence == fence or self.fence.startswith(f"{fence}/")
        )
        if self.status != DONE or not mine or self.fence == keep:
            return None
        return replace(self, status=RELEASED)


def claim(
    lease: Lease | None, now: datetime, length: timedelta, *, monotonic: bool = True
) -> Lease | None:
    """The new lease if ``now`` may claim the work (else None)."""
    if lease is not None and not lease.claimable(now, monotonic=monotonic):
        return None
    return Lease(PENDING, now, now + length)
