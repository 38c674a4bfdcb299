"""Run the product at a chosen instant, in this process or in a child process.

Every entry point reads one clock, :data:`costguard.events.CLOCK` (the Lambdas
and the ``costguard`` command alike). A test sets it here; a child process gets it set by
a short boot script before the real command's ``main`` runs. Time then advances from the
chosen instant as it does on a wall clock, so a command's own durations stay real. No
test reads the wall clock, and the product has no test-only branch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

#: An ordinary instant for tests that need "now": mid-month, midday, a weekday (a Friday).
#: (The demos' own instant is :data:`costguard_demo.story.STORY_END`.)
MIDDAY = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

_BOOT = """
import sys, time
from datetime import datetime, timedelta
from costguard import events
start, origin = datetime.fromisoformat(sys.argv[1]), time.monotonic()
events.CLOCK = lambda: start + timedelta(seconds=time.monotonic() - origin)
from costguard.cli import main
sys.argv = ["costguard", *sys.argv[2:]]
sys.exit(main(sys.argv[1:]))
"""


def costguard_at(instant: datetime) -> list[str]:
    """The argv prefix of ``costguard`` in a child process whose clock starts at ``instant``:
    ``[*costguard_at(MIDDAY), "scan", "--json"]``."""
    if instant.tzinfo is None:
        raise ValueError("instant must be timezone-aware")
    return [sys.executable, "-c", _BOOT, instant.astimezone(UTC).isoformat()]


@contextmanager
def clock_at(instant: datetime, *, frozen: bool = False) -> Iterator[None]:
    """In this process: every entry point's clock starts at ``instant`` and advances.

    ``frozen``: it stays at ``instant`` (a simulated timeline whose checker must know the
    exact "now" each run judged by, to the microsecond, as at a TTL's boundary).
    """
    import time
    from datetime import timedelta

    from costguard import events

    saved, origin = events.CLOCK, time.monotonic()
    if frozen:
        events.CLOCK = lambda: instant
    else:
        events.CLOCK = lambda: instant + timedelta(seconds=time.monotonic() - origin)
    try:
        yield
    finally:
        events.CLOCK = saved


def snapshots_start_on_the_clock(monkeypatch: Any) -> None:
    """moto starts an EBS snapshot at the real clock's time; from here on, at
    :data:`costguard.events.CLOCK`'s, the simulated time a test runs its guard at.

    A guard judges a snapshot by when it started (newer than the volume was first seen
    unattached, or old enough to expire), so a simulated timeline needs the two clocks to
    agree. (The demos set the same stamp on moto's objects themselves:
    :func:`costguard_demo.server.stamp_new_snapshots`.)
    """
    from moto.ec2.models.elastic_block_store import Snapshot

    from costguard import events

    created = Snapshot.__init__

    def start_on_the_clock(self: Any, *args: Any, **kwargs: Any) -> None:
        created(self, *args, **kwargs)
        self.start_time = events.CLOCK().astimezone(UTC).replace(tzinfo=None)

    monkeypatch.setattr(Snapshot, "__init__", start_on_the_clock)
