"""Guards across an Organization: which member accounts each guard run covers, and where.

Pure: no clock, no I/O. A *guard run* is one guard in one member account at one scheduled
time, over the account's regions the guard can act in. The hub's fan-out plans the runs
from the directory the scan ticks keep (no AWS call), and the act consumers carry them
out through the member account's act role, on the single-account path: the same
policies, the same executor (warn, grace, claim, dry-run, audit), the hub's ledger.

Where a guard looks depends on what it guards (:class:`Reach`):

- **compute** (idle notebooks): only the account's *active* regions, those where the
  scan or the probe found compute. A notebook in a region with none is found by the
  probe within the probe interval, and guarded from the next run on; an empty region
  costs the guard nothing.
- **data** (stale volumes, stale objects): every region of the account the deployment
  allows. Data is not compute: a region holding only an unattached volume is "empty"
  to the probe, and the guard must still see it.

An account whose regions have not been read yet (new, or unreachable) has no run: the
scan tick reads its regions first and reports it when it cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from costguard.domain.alerts import MAX_LINE_CHARS, Alert, AlertKind, AlertSeverity, clip
from costguard.domain.calendar import require_utc
from costguard.domain.directory import Directory, SliceState
from costguard.domain.findings import Finding, FindingCode, Severity
from costguard.domain.org import Slice
from costguard.domain.org_roles import OrgRoles


class Reach(StrEnum):
    """Which of an account's regions a guard acts in (see the module's docstring)."""

    COMPUTE = "compute"
    DATA = "data"


@dataclass(frozen=True, slots=True, order=True)
class GuardRun:
    """One guard in one member account at one scheduled time."""

    tick: datetime
    guard: str
    account: str
    regions: tuple[str, ...]

    def __post_init__(self) -> None:
        require_utc(self.tick)
        Slice(self.account, self.regions[0] if self.regions else "us-east-1")  # checks the id
        if not self.regions:
            raise ValueError(f"a guard run of {self.guard} in {self.account} names no region")

    @property
    def key(self) -> str:
        return f"{self.guard}/{self.account}"


def guard_scope(org_scope: str, account: str) -> str:
    """The ledger scope of the guards in one member account: its claims, audit trail,
    sweep state and findings, apart from every other account's (and from the slices'
    ``org/account/region`` scopes)."""
    return f"{org_scope}/{account}"


def plan_guard_runs(
    directory: Directory,
    accounts: Sequence[str],
    tick: datetime,
    guard: str,
    reach: Reach,
    allow: frozenset[str] | None = None,
) -> list[GuardRun]:
    """The runs of ``guard`` at ``tick``: one per listed account that has regions to act
    in, from the directory alone.

    ``allow`` is the deployment's region allow-list (None: every region the account has
    enabled). Accounts are taken once each, in the listing's order.
    """
    tick = require_utc(tick)
    runs: list[GuardRun] = []
    for account in dict.fromkeys(accounts):
        entry = directory.regions.get(account)
        regions = [r for r in (entry.regions if entry else ()) if allow is None or r in allow]
        if reach is Reach.COMPUTE:
            regions = [
                r for r in regions if directory.status(Slice(account, r)).state is SliceState.ACTIVE
            ]
        if regions:
            runs.append(GuardRun(tick, guard, account, tuple(sorted(set(regions)))))
    return runs


# -- an account the guards cannot enter ---------------------------------------------------------


def act_unreachable_finding(run: GuardRun, code: str, detail: str) -> Finding:
    """A finding naming the account and the guard that could not act in it."""
    return Finding(
        code=FindingCode.ACT_FAILED,
        resource=f"account/{run.account}",
        message=clip(
            f"the {run.guard} guard cannot act in account {run.account}: {code}: {detail}",
            MAX_LINE_CHARS,
        ),
        severity=Severity.ERROR,
    )


def act_unreachable_alert(run: GuardRun, code: str, detail: str, now: datetime) -> Alert:
    """One alert naming the account; each account at most once a UTC day (every guard
    and every retry claims the same key), so a broken act role is one message a day."""
    now = require_utc(now)
    day = f"{now:%Y%m%d}"
    return Alert(
        alert_id=f"{AlertKind.SCAN_FAILED}/org-act-unreachable/{run.account}/{day}",
        kind=AlertKind.SCAN_FAILED,
        project=None,
        severity=AlertSeverity.WARNING,
        title=f"CostGuard cannot act in account {run.account}",
        summary=(
            f"The {run.guard} guard could not enter account {run.account} ({code}). Its idle "
            "notebooks are not stopped and its stale data is not deleted until it works; "
            "nothing there was changed, and the other accounts are guarded."
        ),
        at=now,
        why=clip(f"{code}: {detail}", MAX_LINE_CHARS),
        next_steps=(
            f"Check that the account has the CostGuard member stack (role {OrgRoles.MEMBER_ACT})"
            f" and that the hub's role {OrgRoles.HUB_ACT} may assume it.",
            "Or tag the account costguard:opt-out=true to leave it out on purpose.",
        ),
        facts={"account": run.account, "guard": run.guard, "error": code},
        dedupe=(f"act-unreachable/{day}/{run.account}",),
    )
