"""The hub's wall time per tick: the tick's work items scheduled over the queue consumers.

Pure (no AWS, no clock): a small discrete-event simulation of what SQS FIFO and Lambda's
event source do with one scheduled time's messages.

- The messages wait in the queue in the order the fan-out sent them.
- The event source keeps at most ``concurrency`` invocations running (the event source's
  ``MaximumConcurrency``). Whenever one is free it receives a batch: up to
  ``batch_size`` messages, in queue order, from message groups with nothing in flight
  (FIFO never hands out a group's next message while one of it is being processed), and
  holds those groups until the invocation ends. Several messages of one group may share
  a batch; they then run one after the other, as the consumer processes a batch in order.
- An invocation lasts ``cold_start`` (a new container only), plus ``per_invocation``
  (building the consumer's graph), plus its items' seconds, one after the other.

What it leaves out, and why it is an upper bound on AWS's behaviour for the same
seconds: the event source's pollers receive concurrently, whereas here a freed slot takes
the next batch at once and nothing else overlaps; the fan-out's own time and the
aggregation that the last slice triggers are added by the caller, in sequence.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Message:
    """One work item in the queue: its FIFO group and the seconds the consumer spends on it."""

    group: str
    seconds: float


@dataclass(frozen=True, slots=True)
class Schedule:
    #: From the first receive to the last invocation's end (seconds).
    makespan: float
    invocations: int
    #: Containers started (each paid ``cold_start`` once).
    containers: int
    #: Invocations running at once, at most.
    peak_concurrency: int
    #: Sum of invocation durations: what Lambda bills as duration.
    busy_seconds: float
    #: Items per invocation (the batches as received).
    batch_sizes: tuple[int, ...]


def schedule(
    messages: Sequence[Message],
    *,
    concurrency: int,
    batch_size: int = 10,
    per_invocation: float = 0.0,
    cold_start: float = 0.0,
    warm_containers: int = 0,
) -> Schedule:
    """Run the queue to empty; the figures of the run.

    ``warm_containers`` are already running from an earlier tick (no cold start for them).
    """
    if concurrency < 1 or batch_size < 1:
        raise ValueError("concurrency and batch_size must be at least 1")
    pending = list(messages)
    in_flight: set[str] = set()
    #: (end time, invocation number, groups held)
    running: list[tuple[float, int, tuple[str, ...]]] = []
    idle_warm = warm_containers
    containers = warm_containers
    now = 0.0
    invocations = 0
    busy = 0.0
    peak = 0
    sizes: list[int] = []
    while pending or running:
        while len(running) < concurrency and pending:
            batch = _receive(pending, in_flight, batch_size)
            if not batch:
                break  # every waiting group is in flight: wait for an invocation to end
            start_cost = 0.0
            if idle_warm > 0:
                idle_warm -= 1
            else:
                containers += 1
                start_cost = cold_start
            duration = start_cost + per_invocation + sum(m.seconds for m in batch)
            groups = tuple(dict.fromkeys(m.group for m in batch))
            in_flight.update(groups)
            heapq.heappush(running, (now + duration, invocations, groups))
            invocations += 1
            busy += duration
            sizes.append(len(batch))
            peak = max(peak, len(running))
        if not running:
            break
        end, _n, groups = heapq.heappop(running)
        now = end
        in_flight.difference_update(groups)
        idle_warm += 1
    return Schedule(now, invocations, containers, peak, busy, tuple(sizes))


def _receive(pending: list[Message], in_flight: set[str], batch_size: int) -> list[Message]:
    """Take up to ``batch_size`` messages, in order, of groups with nothing in flight."""
    batch: list[Message] = []
    keep: list[Message] = []
    for m in pending:
        if len(batch) < batch_size and m.group not in in_flight:
            batch.append(m)
        else:
            keep.append(m)
    if batch:
        pending[:] = keep
    return batch
