"""The stale-object guard: deletes objects older than their bucket's ``costguard:ttl``.

Its policy surveys each opted-in bucket and its actuator sweeps one bucket at a time
(:mod:`costguard.services.stale_objects`); every S3 call, and so every permission its
role holds, is the object store's (:class:`costguard.adapters.s3.S3ObjectStore`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from costguard.adapters.s3 import S3ObjectStore, bucket_lister
from costguard.domain.org_act import Reach
from costguard.domain.tags import Tags
from costguard.guards.spec import GuardSpec
from costguard.services.guard import Guard, GuardContext
from costguard.services.stale_objects import (
    S3BucketActuator,
    StaleObjectsPolicy,
    SweepOptions,
    TimeLeftHolder,
)
from costguard.services.sweep import SweepService, SweepSettings

if TYPE_CHECKING:
    from costguard.adapters.aws import ClientFactory
    from costguard.settings import Settings

NAME = "stale-objects"


def build(settings: Settings, clients: ClientFactory, context: GuardContext) -> Guard:
    """The stale-object guard: its policy (survey, decisions) and its bucket actuator."""
    ledger = context.ledger
    home = settings.regions[0]
    regions: dict[str, str] = {}
    listing = bucket_lister(lambda r: clients("s3", r), home)

    def region_of(bucket: str) -> str:
        if bucket not in regions:
            regions.update(dict(listing()))
        return regions.get(bucket, home)

    # The catalog the scan prices with (the stored one when deployed), as `prices show`
    # shows it: not the package's own file, which a refresh never updates.
    catalog = context.catalog

    def rate(region: str) -> Decimal:
        # Never $0: an unknown region is counted at the dearest known rate (an upper bound).
        found = catalog.s3_gb_month(region)
        if found is None:
            raise ValueError("the price catalog has no S3 Standard storage rate")
        return found

    store = S3ObjectStore(lambda r: clients("s3", r), region_of)
    time_left = TimeLeftHolder()
    options = SweepOptions(
        prefixes=settings.s3_sweep_prefixes,
        keep_prefix=settings.s3_keep_prefix,
        purge_noncurrent=settings.s3_purge_noncurrent,
        breaker_pct=settings.s3_breaker_pct,
        breaker_max_bytes=settings.s3_breaker_max_gib * 1024**3,
        backstop=settings.s3_backstop,
    )
    sweeps = SweepService(
        store,
        ledger,
        ledger,
        context.notifier,
        SweepSettings(settings.scope, rate(home), dry_run=settings.dry_run),
    )

    def listed() -> list[tuple[str, str]]:
        found = listing()
        regions.update(dict(found))
        return found

    policy = StaleObjectsPolicy(
        store=store,
        sweeps=sweeps,
        state=ledger,
        findings=ledger,
        scope=settings.scope,
        account=clients.account,
        regions=settings.regions,
        options=options,
        time_left=time_left,
        usd_per_gb_month=rate,
        list_buckets=listed,
        tag_keys=settings.tag_keys,
    )
    actuator = S3BucketActuator(store, sweeps, ledger, settings.scope, options, time_left)
    return Guard(
        NAME,
        policy,
        [actuator],
        opt_in_tags=(Tags.TTL,),
        bind_time_left=lambda b: setattr(time_left, "time_left", b),
        findings=lambda: policy.found,
        answerable=False,
    )


STALE_OBJECTS = GuardSpec(
    name=NAME,
    construct_id="StaleObjects",
    description="deletes objects older than their bucket's costguard:ttl, to the hour",
    build=build,
    actuators=(S3ObjectStore,),
    reach=Reach.DATA,
    records_findings=True,
    # Hourly: "48h" is kept to the hour. The run stops itself well before its timeout and
    # resumes next hour; the timeout stays under the executor's 15-minute claim lease,
    # so two runs never sweep one bucket at once even when one starts late.
    every_minutes=60,
    timeout_minutes=10,
    memory_mb=512,
)
