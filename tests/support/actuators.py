"""An in-memory actuator: resources as dicts, every call recorded, failures on demand."""

from __future__ import annotations

import threading
from collections.abc import Sequence
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
        #: The ids of each ``inspect`` call, in order (one call may look at many).
        self.looks: list[tuple[str, ...]] = []
        self.fail_on: set[str] = set()
        #: Makes concurrent runs all inspect before any acts: the worst interleaving.
        self.inspect_barrier: threading.Barrier | None = None
        self._lock = threading.Lock()

    def inspect(self, targets: Sequence[Target]) -> dict[str, Observed]:
        seen: dict[str, Observed] = {}
        with self._lock:
            self.looks.append(tuple(t.id for t in targets))
            for t in targets:
                r = self.resources.get(t.id)
                if r is not None:
                    seen[t.key] = Observed(r.state, dict(r.tags), r.state == "Stopped")
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
