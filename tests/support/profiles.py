"""Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (loaded by tests/conftest.py).

``test`` (``make test``, the default) keeps Hypothesis's defaults but one: no example has a
deadline, under either profile. A deadline is a timed test, and timing is measured in
``benchmarks/``: on a loaded 2-core machine the first example of a property (a time-zone
database read, say) took 680 ms against the default 200 ms and failed the suite. ``property`` (``make
property``) runs ten times as many examples, and a property whose every example is a whole
run takes its full count from :func:`examples`. A test that names its own
``max_examples`` keeps it under both.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "test")
settings.register_profile("test", deadline=None)
settings.register_profile("property", max_examples=1000, deadline=None)
settings.load_profile(PROFILE)


def examples(in_make_test: int, in_make_property: int) -> int:
    """How many examples a costly property runs: few in ``make test``, many in ``make
    property``."""
    return in_make_property if PROFILE == "property" else in_make_test
