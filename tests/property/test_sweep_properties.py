"""Properties of the stale-object sweep over random buckets, interrupted at random points.

Exactly the expired, in-scope, unprotected objects are deleted, each once, and nothing
else; the manifest in the audit trail names exactly those; a pass the breaker stops
deletes nothing, and hour after hour no pass deletes more than its share of what it found
in scope. `make property` runs 15,000 cases (SWEEP_PROPERTY_EXAMPLES per test); the
everyday suite runs a small profile.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costguard.adapters.memory import InMemoryLedger
from costguard.domain.sweep import Lock, SweepConfig
from costguard.services.sweep import BucketRef, SweepService, SweepSettings, decode_manifest
from tests.property.conftest import CASES
from tests.support.fake_s3 import Countdown, FakeBucket, FakeS3, obj

EXAMPLES = int(os.environ.get("SWEEP_PROPERTY_EXAMPLES", "60"))
#: When each random bucket is first surveyed; ages and later passes count from here.
FIRST_SURVEY = datetime(2026, 11, 5, 12, tzinfo=UTC)
PREFIXES = ["", "a/", "a/b/", "keep/", "tmp/", "ké/", "keep/x/", "kee"]
REF = BucketRef("b", "us-east-1/s3-bucket/b", "123456789012", "p", ("o@example.com",))

keys = st.builds(
    lambda p, s: p + s,
    st.sampled_from(PREFIXES),
    st.text(alphabet="abz/é\U0001f600", min_size=0, max_size=4),
).filter(bool)  # S3 keys are at least one character
objects = st.dictionaries(
    keys,
    st.tuples(
        st.integers(0, 200),  # age in hours
        st.integers(0, 10**6),  # size
        st.sampled_from(["none", "hold", "retained", "retention-over"]),
    ),
    max_size=40,
)


def _bucket(objs: dict[str, tuple[int, int, str]], locked: bool) -> FakeBucket:
    b = FakeBucket(object_lock=locked)
    for key, (age, size, lock) in objs.items():
        b.objects[key] = obj(key, size, FIRST_SURVEY - timedelta(hours=age), etag=f"e{age}")
        if lock == "hold":
            b.locks[key] = Lock(legal_hold=True)
        elif lock == "retained":
            b.locks[key] = Lock(retain_until=FIRST_SURVEY + timedelta(days=365))
        elif lock == "retention-over":
            b.locks[key] = Lock(retain_until=FIRST_SURVEY - timedelta(days=1))
    return b


def _service(s3: FakeS3, ledger: InMemoryLedger) -> SweepService:
    return SweepService(s3, ledger, ledger, None, SweepSettings("s", Decimal("0.023"), False))


def _until_complete(step, interrupts: list[int], page_size: int, limit: int = 500):  # type: ignore[no-untyped-def]
    """Run ``step(budget)`` until it completes, each run stopped after its drawn number of
    pages (a budget check per page, and one per Object Lock check on it)."""
    for i in range(limit):
        pages = interrupts[i % len(interrupts)] if interrupts else 10**6
        result = step(Countdown(pages * (page_size + 1)))
        if result.complete:
            return result
    raise AssertionError("the sweep never completed")


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    objs=objects,
    ttl_hours=st.sampled_from([1, 24, 48, 72]),
    prefixes=st.lists(st.sampled_from(PREFIXES), max_size=3),
    keep=st.sampled_from(["keep/", "", "a/b/"]),
    locked=st.booleans(),
    page_size=st.integers(1, 7),
    interrupts=st.lists(st.integers(1, 6), max_size=5),
    later=st.integers(0, 30),
)
def test_deletes_exactly_the_expired_in_scope_unprotected_objects_once(
    objs: dict[str, tuple[int, int, str]],
    ttl_hours: int,
    prefixes: list[str],
    keep: str,
    locked: bool,
    page_size: int,
    interrupts: list[int],
    later: int,
) -> None:
    CASES["count"] += 1
    # GIVEN a bucket of random objects, and a sweep that never trips its breaker
    s3 = FakeS3(page_size)
    s3.buckets["b"] = _bucket(objs, locked)
    s3.buckets["b"].tags = {"costguard:ttl": f"{ttl_hours}h"}
    before = dict(s3.buckets["b"].objects)
    ledger = InMemoryLedger()
    service = _service(s3, ledger)
    config = SweepConfig(
        timedelta(hours=ttl_hours), tuple(prefixes), keep, breaker_pct=100, backstop=False
    )
    # WHEN it is surveyed, then swept `later` hours on, both interrupted at random points
    survey = _until_complete(
        lambda b: service.survey(REF, config, FIRST_SURVEY, b), interrupts, page_size
    )
    now = FIRST_SURVEY + timedelta(hours=later)
    tags = {"costguard:ttl": f"{ttl_hours}h"}
    _until_complete(lambda b: service.sweep(REF, config, now, b, tags), interrupts, page_size)

    # THEN exactly the expired, in-scope, unprotected objects are gone, each deleted once
    def protected(key: str) -> bool:
        return locked and s3.buckets["b"].locks.get(key, Lock()).protects(now)

    expected = {
        k
        for k, o in before.items()
        if config.in_scope(k) and o.last_modified < now - config.ttl and not protected(k)
    }
    deleted = [k for _, k in s3.deleted]
    assert set(deleted) == expected
    assert all(n == 1 for n in Counter(deleted).values())
    assert set(s3.buckets["b"].objects) == set(before) - expected
    # the survey counted what was in scope, each object once
    in_scope = [k for k in before if config.in_scope(k)]
    assert survey.in_scope is not None and survey.in_scope.objects == len(in_scope)
    # and the audit manifest names every deleted key, once
    manifest = [
        row[0]
        for e in ledger.audit_trail("s", "2026-11") + ledger.audit_trail("s", "2026-12")
        if e.outcome == "deleted"
        for row in decode_manifest(e.details["manifest"])
    ]
    assert sorted(manifest) == sorted(deleted)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objs=objects,
    pct=st.integers(1, 100),
    page_size=st.integers(1, 7),
    interrupts=st.lists(st.integers(1, 6), max_size=4),
)
def test_a_first_pass_over_the_breakers_share_deletes_nothing(
    objs: dict[str, tuple[int, int, str]], pct: int, page_size: int, interrupts: list[int]
) -> None:
    CASES["count"] += 1
    # GIVEN a bucket, a 48-hour TTL and a breaker at `pct` %
    s3 = FakeS3(page_size)
    s3.buckets["b"] = _bucket(objs, False)
    s3.buckets["b"].tags = {"costguard:ttl": "48h"}
    ledger = InMemoryLedger()
    service = _service(s3, ledger)
    config = SweepConfig(timedelta(hours=48), keep_prefix="keep/", breaker_pct=pct)
    survey = _until_complete(
        lambda b: service.survey(REF, config, FIRST_SURVEY, b), interrupts, page_size
    )
    assert survey.in_scope is not None and survey.would_delete is not None
    # WHEN the first deletion run comes
    result = service.sweep(REF, config, FIRST_SURVEY, Countdown(10**6), {})
    # THEN over the share it trips and deletes nothing; within it, it deletes at most the share
    over = survey.would_delete.objects * 100 > pct * survey.in_scope.objects
    if over:
        assert result.phase == "tripped"
        assert s3.deleted == []
    else:
        assert len(s3.deleted) * 100 <= pct * max(survey.in_scope.objects, 1)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objs=objects,
    pct=st.integers(1, 99),
    page_size=st.integers(1, 7),
    interrupts=st.lists(st.integers(1, 6), max_size=4),
    hours=st.lists(st.integers(1, 40), min_size=1, max_size=6),
)
def test_no_pass_deletes_more_than_its_share_of_what_it_found_and_none_empties_the_bucket(
    objs: dict[str, tuple[int, int, str]],
    pct: int,
    page_size: int,
    interrupts: list[int],
    hours: list[int],
) -> None:
    """Defect: a pass judged page by page deleted before it tripped, and a share taken of
    the previous pass's count let passes one after another empty a bucket (10 -> 5 -> 0)."""
    CASES["count"] += 1
    # GIVEN a bucket, a 48-hour TTL and a breaker at `pct` %, surveyed and warned
    s3 = FakeS3(page_size)
    s3.buckets["b"] = _bucket(objs, False)
    tags = {"costguard:ttl": "48h"}
    s3.buckets["b"].tags = dict(tags)
    ledger = InMemoryLedger()
    service = _service(s3, ledger)
    config = SweepConfig(timedelta(hours=48), keep_prefix="keep/", breaker_pct=pct, backstop=False)
    _until_complete(lambda b: service.survey(REF, config, FIRST_SURVEY, b), interrupts, page_size)

    def in_scope() -> int:
        return sum(1 for k in s3.buckets["b"].objects if config.in_scope(k))

    # WHEN passes run at random later hours, each interrupted at random points
    found: dict[str, int] = {}  # pass -> objects in scope when its first delete's run began
    deleted: Counter[str] = Counter()
    now, counted = FIRST_SURVEY, set()
    for step in hours:
        now += timedelta(hours=step)
        for i in range(500):
            before = in_scope()
            pages = interrupts[i % len(interrupts)] if interrupts else 10**6
            result = service.sweep(REF, config, now, Countdown(pages * (page_size + 1)), tags)
            for e in ledger.audit_trail("s", "2026-11") + ledger.audit_trail("s", "2026-12"):
                if e.outcome == "deleted" and e.event_id not in counted:
                    counted.add(e.event_id)
                    pass_id = str(e.details["batch"]).split("-")[0]
                    found.setdefault(pass_id, before)
                    deleted[pass_id] += int(e.details["objects"])
            if result.complete:
                break
    # THEN no pass deleted more than its share of what was in scope when it began,
    # so none emptied what it found
    for pass_id, n in deleted.items():
        assert n * 100 <= pct * found[pass_id], (pass_id, n, found[pass_id])
