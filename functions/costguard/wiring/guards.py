"""A single-account guard run's composition: the guard the Lambda is bound to, built on
its own account's clients, and the ledger, topic and catalog it records in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from costguard.guards import SPECS
from costguard.services.executor import ExecutorSettings
from costguard.wiring.parts import clients_for, guard_context

if TYPE_CHECKING:
    from costguard.adapters.sns import AnswerLinks
    from costguard.guards import GuardFactory
    from costguard.services.guard import Guard, GuardContext
    from costguard.settings import Settings


def executor_settings(settings: Settings) -> ExecutorSettings:
    """The scope claims and the audit trail are kept under, dry-run and the tag keys."""
    return ExecutorSettings(
        scope=settings.scope, dry_run=settings.dry_run, tag_keys=settings.tag_keys
    )


def build_guard(
    settings: Settings,
    session: Any,
    name: str | None,
    guards: Mapping[str, GuardFactory] | None = None,
    answer_links: AnswerLinks | None = None,
) -> tuple[Guard, GuardContext]:
    """The guard named by the event (or the one the Lambda is bound to), from
    ``guards`` (by default the shipped registry), and its context; ``answer_links``: its
    warnings carry e-mailed answer links (:mod:`costguard.wiring.answer_links`)."""
    registry = {n: s.build for n, s in SPECS.items()} if guards is None else guards
    name = name or settings.guard
    if name is None:
        raise ValueError("no guard named: the event has no 'guard' and the Lambda none bound")
    if settings.guard and name != settings.guard:
        # Each guard's Lambda holds only that guard's permissions: running another
        # guard's policy with them would fail halfway, so it is refused before any call.
        raise ValueError(f"this Lambda runs the {settings.guard!r} guard, not {name!r}")
    factory = registry.get(name)
    if factory is None:
        known = ", ".join(sorted(registry)) or "none yet"
        raise ValueError(f"unknown guard {name!r} (known: {known})")
    clients = clients_for(settings, session)
    context = guard_context(settings, clients, answer_links)
    return factory(settings, clients, context), context
