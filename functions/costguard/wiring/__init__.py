"""Composition: every graph CostGuard runs, built from settings and typed clients here and
nowhere else (a handler parses its event, calls what is built here, and logs).

- :mod:`~costguard.wiring.parts`: the parts every graph shares (ledger, topic, catalog,
  clients, alert service, a guard's context);
- :mod:`~costguard.wiring.scan`: the scan and the steps after it;
- :mod:`~costguard.wiring.guards`: one guard's run in one account;
- :mod:`~costguard.wiring.org`: Organization mode (the hub's settings, its three Lambdas);
- :mod:`~costguard.wiring.refresh`: the price refresh.

Every builder takes a :class:`ClientFactory` (typed clients) or a session, never
settings read twice; a graph can be built from fakes instead, and its use case runs the
same on either.
"""

from __future__ import annotations

from costguard.wiring.parts import (
    CATALOG_CACHE,
    BundledCatalog,
    CallCounter,
    build_alert_service,
    build_ledger,
    catalog_reader,
    clients_for,
    guard_context,
)
from costguard.wiring.scan import build_scan_cycle, build_scan_service, scan_cycle

__all__ = [
    "CATALOG_CACHE",
    "BundledCatalog",
    "CallCounter",
    "build_alert_service",
    "build_ledger",
    "build_scan_cycle",
    "build_scan_service",
    "catalog_reader",
    "clients_for",
    "guard_context",
    "scan_cycle",
]
