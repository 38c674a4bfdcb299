"""An in-memory actuator: resources as dicts, every call recorded, failures on demand."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from costguard.domain.decisions import Decision, Observed, Target


@dataclass
class FakeResource:
    state: str = "InService"
    tags: dict[str, str] = field(default_factory=dict)


class InMemoryActuator:
    """Stops "notebooks" held in memory. ``fail_on`` makes ``apply`` raise for those ids."""

    def __init__(self, kind: str, resources: dict[str, FakeResource]) -> None:
        self.kind = kind
        self.opt_in_tags: tuple[str, ...] = ()
        self.resources = resources
        self.calls: list[tuple[str, str]] = []
        self.fail_on: set[str] = set()
        #: Makes concurrent runs all inspect before any acts: the worst interleaving.
        self.inspect_barrier: threading.Barrier | None = None
        self._lock = threading.Lock()

    def inspect(self, target: Target) -> Observed | None:
        with self._lock:
            r = self.resources.get(target.id)
            seen = None if r is None else Observed(r.state, dict(r.tags), r.state == "Stopped")
        if self.inspect_barrier is not None:
            self.inspect_barrier.wait()
        return seen

    def mark(self, target: Target, key: str, value: str) -> None:
        with self._lock:
            self.calls.append(("mark", target.id))
            self.resources[target.id].tags[key] = value

    def unmark(self, target: Target, key: str) -> None:
        with self._lock:
            self.calls.append(("unmark", target.id))
            self.resources[target.id].tags.pop(key, None)

    def apply(self, decision: Decision) -> str:
        rid = decision.target.id
        with self._lock:
            self.calls.append(("apply", rid))
            if rid in self.fail_on:
                raise RuntimeError(f"cannot stop {rid}")
            self.resources[rid].state = "Stopped"
        return f"stopped {rid}"

    @property
    def mutations(self) -> list[tuple[str, str]]:
        return list(self.calls)
