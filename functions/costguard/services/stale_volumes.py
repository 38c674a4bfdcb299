"""The stale-volume guard's policy: read volumes and snapshots, run the clock, judge.

Per region and run: ``ceil(V/500)`` DescribeVolumes, ``ceil(S/500)`` DescribeSnapshots
(only snapshots tagged ``costguard:ttl``), one ledger read of the region's clock, and
one write only when the clock changed. Everything after that is the executor's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from costguard.domain.decisions import Decision
from costguard.domain.findings import Finding, FindingCode
from costguard.domain.stale_volumes import (
    SnapshotView,
    VolumeRules,
    VolumeView,
    advance_clock,
    judge_snapshots,
    judge_volumes,
    merge_clock,
)
from costguard.domain.storage import ProvisionedRates
from costguard.ports import FindingStore, SourceError, StateStore

#: Attempts at an optimistic clock write before the region is judged with no clock.
CLOCK_ATTEMPTS = 3


class VolumeSource(Protocol):
    def volumes(self, region: str) -> list[VolumeView]: ...

    def snapshots(self, region: str) -> list[SnapshotView]: ...


def clock_name(region: str) -> str:
    return f"ebs-unattached-clock/{region}"


@dataclass
class StaleVolumePolicy:
    source: VolumeSource
    state: StateStore
    scope: str
    regions: Sequence[str]
    rules: VolumeRules = field(default_factory=VolumeRules)
    #: region -> volume type -> $/GB-month; region -> snapshot $/GB-month.
    volume_prices: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    snapshot_prices: Mapping[str, Decimal] = field(default_factory=dict)
    findings_store: FindingStore | None = None
    #: What the last ``decide`` found wrong (malformed tags, unreadable regions).
    findings: list[Finding] = field(default_factory=list)

    #: Regions read at once: a run's time is mostly the per-region calls' latency.
    max_workers: int = 8
    #: region -> volume type -> provisioned IOPS/throughput tiers (the scan's rates).
    provisioned_prices: ProvisionedRates = field(default_factory=dict)

    def decide(self, now: datetime) -> Sequence[Decision]:
        # The regions are independent (their own clocks, listings and decisions): read
        # at once, kept in the configured order.
        regions = list(dict.fromkeys(self.regions))
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_workers, len(regions)))) as pool:
            done = list(pool.map(lambda r: self._region(r, now), regions))
        self.findings = [f for _decisions, found in done for f in found]
        decisions = [d for made, _found in done for d in made]
        if self.findings and self.findings_store is not None:
            self.findings_store.record_findings(self.scope, now, self.findings)
        return decisions

    def _region(self, region: str, now: datetime) -> tuple[list[Decision], list[Finding]]:
        findings: list[Finding] = []
        try:
            volumes = self.source.volumes(region)
        except SourceError as exc:
            # No listing, no clock change and no decision: a failed read never deletes.
            findings.append(Finding(FindingCode.SCAN_FAILED, f"{region}/ebs", str(exc)))
            volumes = None
        decisions: list[Decision] = []
        if volumes is not None:
            clock = self._tick(region, volumes, now, findings)
            judged = judge_volumes(
                volumes,
                clock,
                now,
                self.rules,
                self.volume_prices.get(region),
                self.snapshot_prices.get(region),
                self.provisioned_prices.get(region),
            )
            decisions.extend(judged.decisions)
            findings.extend(judged.findings)
        try:
            snapshots = self.source.snapshots(region)
        except SourceError as exc:
            findings.append(Finding(FindingCode.SCAN_FAILED, f"{region}/ebs-snapshots", str(exc)))
            return decisions, findings
        judged = judge_snapshots(snapshots, now, self.rules, self.snapshot_prices)
        findings.extend(judged.findings)
        return decisions + list(judged.decisions), findings

    def _tick(
        self, region: str, volumes: Sequence[VolumeView], now: datetime, findings: list[Finding]
    ) -> dict[str, int]:
        """Advance the region's clock in the ledger; the clock to judge by.

        Two overlapping runs: the loser re-reads and merges (later first-seen wins). If
        it still cannot write, it judges with no clock at all: nothing is deleted on a
        clock that is not stored.
        """
        name = clock_name(region)
        for _ in range(CLOCK_ATTEMPTS):
            doc, version = self.state.get_state(self.scope, name)
            stored = {str(k): int(v) for k, v in dict(doc.get("volumes", {})).items()}
            mine, left = advance_clock(stored, volumes, now)
            clock = merge_clock(stored, mine, left)
            if clock == stored:
                return clock
            if self.state.put_state(self.scope, name, {"volumes": clock}, version):
                return clock
        findings.append(
            Finding(
                FindingCode.LEDGER_CONTENDED,
                f"{region}/ebs",
                "the unattached-volume clock could not be written (other runs kept writing); "
                "no volume is judged stale this run",
            )
        )
        return {}
