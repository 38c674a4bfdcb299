"""The demos' simulated clock: every story is told at the same instant, whatever the date.

A demo is a story: the same fleet, the same alerts, statuses and actions, every time it is
told. Month-to-date spend, forecasts, budget thresholds, once-a-day alerts and EKS support
dates all depend on *when* in the calendar a scan runs, so the demos never read the wall
clock: their scans, guards and fleets are placed relative to :data:`STORY_END`, a fixed
instant in the middle of a month and of a UTC day.

moto stamps what it creates with the real clock (launch and creation times, a snapshot's
start). Wherever a story reads such a stamp, the demo sets it on moto's backend object to
the story's time (:mod:`costguard_demo.server`, :mod:`costguard_demo.fleet`), so the real
clock never enters the story: a run on the 1st, the 31st, 29 February or at 23:59:59 UTC,
under any ``TZ``, tells the same story.
"""

from __future__ import annotations

from datetime import UTC, datetime

#: When the single-account demo's last scan runs: Wednesday 18 November 2026, 14:00 UTC.
#: Mid-month (budgets have had 17 days to fill, 12 days are left to forecast) and
#: mid-day (a run of scans 15 minutes apart never crosses midnight). The Organization
#: demo's ticks end here too.
STORY_END = datetime(2026, 11, 18, 14, 0, tzinfo=UTC)
